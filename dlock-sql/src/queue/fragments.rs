//! SQL fragments the queue's statements (`statements`) and PostgreSQL's functions
//! (`calls`) both write: a grant's TTL, a waiter's liveness, the observers' channel.

use crate::shared::Dialect;

/// The TTL a grant to the queue entry `alias` (`"h."`, or `""`) is written with:
/// its own, or — for a waiter that polls, which confirms its grant with its next
/// attempt (extending it to its TTL) — no longer than its entry lives, so that a
/// grant made to a waiter that died meanwhile frees the lock that soon, not a TTL
/// later. A waiter told by a message (PostgreSQL) may take the grant as its lease, so
/// its grant carries its whole TTL.
pub(crate) fn grant_ttl(dialect: Dialect, alias: &str) -> String {
    let least = if dialect == Dialect::Sqlite {
        "MIN"
    } else {
        "LEAST"
    };
    format!(
        "CASE WHEN {alias}channel = '' THEN {least}({alias}ttl_ms, {alias}deadline - {now})
         ELSE {alias}ttl_ms END",
        now = dialect.now_ms()
    )
}

/// The PostgreSQL channel on which releases and hand-offs of `table`'s locks are told
/// to observers.
pub(crate) fn release_channel(table: &str) -> String {
    format!("dlock_release_{table}")
}

/// PostgreSQL: ` AND` the entry `alias` is polling or its LISTEN connection is still
/// there; nothing elsewhere.
pub(super) fn listening(dialect: Dialect, alias: &str) -> String {
    match dialect {
        Dialect::Postgres => listening_sql(alias),
        _ => String::new(),
    }
}

/// PostgreSQL: ` AND` the entry `alias` polls, or the mark its LISTEN connection took
/// (`crate::listen`) is still held — a lock-table probe, where reading a backend's
/// status would copy every backend's (0.1 ms a statement).
pub(crate) fn listening_sql(alias: &str) -> String {
    format!(" AND ({alias}.listener = 0 OR NOT pg_try_advisory_xact_lock_shared({alias}.listener))")
}
