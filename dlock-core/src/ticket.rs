//! A lease written down, to hand to another process: `dlock acquire` prints one, and
//! `dlock renew`, `dlock release` and `dlock status` take it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::{Access, FencingToken, Lease, LockError, LockName, OwnerId};

/// What every ticket starts with (the format's version is its last character).
const PREFIX: &str = "dlock-ticket1";

/// A lease as text: the backend it lives on, the lock name, the acquisition's owner
/// id, the fencing token and the TTL — what another process needs to renew or release
/// the lease ([`crate::DistributedLock::resume`] turns it back into a [`Lease`]).
///
/// # What a ticket grants
/// Renewing and releasing that one lease, while it lasts: not taking the lock again
/// once it is lost, not touching any other name. It is a bearer credential — keep it
/// like a password. It carries no URL and no password of the backend (the resuming
/// process connects with its own). Its owner id is 128 random bits, unique to the
/// acquisition, so no ticket tells anything about another: one tenant cannot guess
/// another's. The backend stores the owner id with the lock, though, so whoever can
/// read the lock's row or key (or run `dlock status` on it) could write the same
/// ticket — as they could release the lock by writing to the store directly: tickets
/// add no power beyond the store's own access control.
///
/// Every server backend takes tickets. Write one with
/// [`crate::DistributedLock::hand_over`]: on etcd it first moves the key from this
/// client's shared lease to a lease of its own, and on ZooKeeper it swaps the
/// session's ephemeral node for a TTL node at the same place in the queue; only the
/// ticket's taker keeps either alive (a ticket built with [`Ticket::of`] alone is
/// refused there). A memory lock is the process's own: [`LockError::Unsupported`].
///
/// ```
/// use std::time::Duration;
/// use dlock_core::{FencingToken, LockName, OwnerId, Ticket};
///
/// let ticket = Ticket::new(
///     "postgres",
///     LockName::new("invoices/7")?,
///     OwnerId::from_stored("0123456789abcdef0123456789abcdef"),
///     FencingToken::new(42),
///     Duration::from_secs(300),
/// );
/// let text = ticket.to_string();
/// assert!(text.starts_with("dlock-ticket1:postgres:"));
/// assert_eq!(text.parse::<Ticket>()?, ticket);
/// # Ok::<(), dlock_core::LockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    backend: String,
    name: LockName,
    owner: OwnerId,
    token: FencingToken,
    ttl: Duration,
}

/// What a backend whose leases cannot leave their process answers to `resume`.
pub(crate) fn unsupported(backend: &'static str) -> LockError {
    LockError::unsupported_feature(
        backend,
        "tickets (a lease here cannot leave the process that took it)",
    )
}

impl Ticket {
    /// A ticket for the lease of `owner` on `name` with `token`, on `backend` (its
    /// [`crate::DistributedLock::backend_name`]).
    #[must_use]
    pub fn new(
        backend: &str,
        name: LockName,
        owner: OwnerId,
        token: FencingToken,
        ttl: Duration,
    ) -> Self {
        Self {
            backend: backend.to_owned(),
            name,
            owner,
            token,
            ttl,
        }
    }

    /// The ticket of `lease`, taken on `backend`.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] for a semaphore's permit or a side of a read-write
    /// lock (only a mutex's lease is written down), and for a lease a
    /// [`crate::FallbackLock`] served during an outage: it holds nothing on the server.
    pub fn of(backend: &'static str, lease: &Lease) -> Result<Self, LockError> {
        if lease.fallback().is_some() {
            return Err(LockError::Unsupported {
                backend,
                what: "tickets for a fallback lease (it holds no lock on the server)".into(),
            });
        }
        if lease.access() != Access::Exclusive {
            return Err(LockError::Unsupported {
                backend,
                what: "tickets for a shared lock's lease".into(),
            });
        }
        Ok(Self::new(
            backend,
            lease.name().clone(),
            lease.owner().clone(),
            lease.token(),
            lease.ttl(),
        ))
    }

    /// The backend the lease lives on.
    #[must_use]
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The lock name.
    #[must_use]
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The acquisition's owner id.
    #[must_use]
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The fencing token.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The TTL a renewal asks for.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The same ticket asking for `ttl` on its renewals.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The error for a ticket brought to another backend than its own.
    #[must_use]
    pub fn foreign(&self, backend: &str) -> LockError {
        LockError::InvalidArgument(format!(
            "this ticket is for a lock on {}, not on {backend}",
            self.backend
        ))
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}:{}:{}:{}:{}:{}",
            self.backend,
            self.ttl.as_millis(),
            self.token.get(),
            hex(self.owner.as_str()),
            hex(self.name.as_str()),
        )
    }
}

impl FromStr for Ticket {
    type Err = LockError;

    fn from_str(s: &str) -> Result<Self, LockError> {
        let bad = |why: &str| LockError::InvalidArgument(format!("not a dlock ticket: {why}"));
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [prefix, backend, ttl, token, owner, name] = parts.as_slice() else {
            return Err(bad("expected six fields separated by ':'"));
        };
        if *prefix != PREFIX {
            return Err(bad(&format!("it does not start with {PREFIX}")));
        }
        if backend.is_empty() || !backend.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(bad("no backend"));
        }
        let ttl = ttl
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| bad("the TTL is not a number of milliseconds"))?;
        crate::validate_ttl(ttl)?;
        // dlock never hands out token 0: it is what `inspect` reports for a key another
        // program set (Redis's plain layout), which a ticket must not reach
        let token = token
            .parse::<u64>()
            .ok()
            .filter(|t| *t > 0)
            .map(FencingToken::new)
            .ok_or_else(|| bad("the token is not a number above 0"))?;
        let owner = unhex(owner).ok_or_else(|| bad("the owner id is not hex text"))?;
        if owner.is_empty() {
            return Err(bad("no owner id"));
        }
        // a revoked holder's mark is nobody's owner id: a ticket naming it would renew
        // what an operator revoked
        let owner = OwnerId::from_stored(&owner);
        if owner.is_revoked() {
            return Err(bad("the owner id is a revoked holder's"));
        }
        let name = unhex(name).ok_or_else(|| bad("the name is not hex text"))?;
        Ok(Self::new(backend, LockName::new(&name)?, owner, token, ttl))
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ticket() -> Ticket {
        Ticket::new(
            "redis",
            LockName::new("jobs/nightly: ünïcode").unwrap(),
            OwnerId::from_stored("0123456789abcdef0123456789abcdef.web-7"),
            FencingToken::new(1_733_000_000_000_001),
            Duration::from_millis(300_000),
        )
    }

    #[test]
    fn a_ticket_reads_back_as_written() {
        let t = ticket();
        assert_eq!(t.to_string().parse::<Ticket>().unwrap(), t);
        assert_eq!(t.to_string().lines().count(), 1);
    }

    #[test]
    fn malformed_tickets_are_refused_with_a_reason() {
        let good = ticket().to_string();
        for bad in [
            String::new(),
            "hello".to_owned(),
            good.replace("dlock-ticket1", "dlock-ticket9"),
            good.replacen(":300000:", ":5m:", 1),
            good.replacen(":300000:", ":0:", 1),
            format!("{good}:extra"),
            good.replacen(":redis:", "::", 1),
            good.replacen(":1733000000000001:", ":0:", 1),
            good.trim_end_matches(|c| c != ':').to_owned() + "zz",
            // the owner id (hex of its text) with the revoked mark in front
            good.replacen(":3031", ":213031", 1),
        ] {
            let err = bad.parse::<Ticket>().unwrap_err();
            assert!(
                matches!(err, LockError::InvalidArgument(_)),
                "{bad:?}: {err:?}"
            );
        }
    }
}
