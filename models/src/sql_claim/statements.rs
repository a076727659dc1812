//! What the database does: the take, renewal, release and revoke statements, written
//! in Rust as the statements do them (held to the databases by
//! `tests/sql_differential.rs`).

/// How a take of a row its owner already holds sets the expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expiry {
    /// The statement's: the later of the row's and the take's.
    Latest,
    /// The earlier statement's: the take's, even if earlier.
    Newest,
}

/// How an operator stops the holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stop {
    /// The revoke statement: the owner id replaced by its mark, the expiry kept.
    Revoke,
    /// The holder's row released as its own release would (the mutation).
    Break,
}

/// The revoked mark of owner id `owner` (no owner id has this bit).
const REVOKED: u32 = 1 << 31;

/// The lock's row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// The holding acquisition's owner id; 0: nobody (released).
    pub owner: u32,
    /// Its fencing token.
    pub token: u64,
    /// When it expires, by the database's clock.
    pub expires: i64,
}

/// The take statement at database time `now` (whose clock in µs, the hybrid token's
/// floor, reads `first`), for `owner` whose statement computed `expires` when it began:
/// the row after it, and the token granted (none: refused).
#[must_use]
pub fn take(
    rule: Expiry,
    row: Option<&Row>,
    (owner, expires): (u32, i64),
    now: i64,
    first: u64,
) -> (Option<Row>, Option<u64>) {
    match row {
        None => {
            let r = Row {
                owner,
                token: first,
                expires,
            };
            (Some(r), Some(first))
        }
        Some(r) if r.owner == owner && r.expires > now => {
            let expires = match rule {
                Expiry::Latest => r.expires.max(expires),
                Expiry::Newest => expires,
            };
            let kept = Row {
                expires,
                ..r.clone()
            };
            (Some(kept), Some(r.token))
        }
        Some(r) if r.expires <= now => {
            let token = (r.token + 1).max(first);
            (
                Some(Row {
                    owner,
                    token,
                    expires,
                }),
                Some(token),
            )
        }
        Some(r) => (Some(r.clone()), None),
    }
}

/// The renewal statement: the row after it, and whether it renewed.
#[must_use]
pub fn renew(row: Option<&Row>, owner: u32, token: u64, ttl: i64, now: i64) -> (Option<Row>, bool) {
    match row {
        Some(r) if r.owner == owner && r.token == token && r.expires > now => (
            Some(Row {
                expires: now + ttl,
                ..r.clone()
            }),
            true,
        ),
        other => (other.cloned(), false),
    }
}

/// The release statement: the row after it (expired at once, never deleted).
#[must_use]
pub fn release(row: Option<&Row>, owner: u32, token: u64, now: i64) -> Option<Row> {
    match row {
        Some(r) if r.owner == owner && r.token == token && r.expires > now => Some(Row {
            owner: 0,
            token: r.token,
            expires: now,
        }),
        other => other.cloned(),
    }
}

/// The revoke statement: while `owner` holds the row with `token`, its owner id
/// becomes the revoked mark and its expiry stays; the row after it.
#[must_use]
pub fn revoke(row: Option<&Row>, owner: u32, token: u64, now: i64) -> Option<Row> {
    match row {
        Some(r) if r.owner == owner && r.token == token && r.expires > now => Some(Row {
            owner: owner | REVOKED,
            ..r.clone()
        }),
        other => other.cloned(),
    }
}
