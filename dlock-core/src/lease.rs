//! What an acquisition returns, and what `inspect` reports.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::{Access, FencingToken, LockError, LockName, OwnerId};

/// The safety margin subtracted from a lease's TTL on the client side: 1 % of the TTL
/// plus 2 ms, as in the Redlock paper, so the client stops trusting a lease before the
/// server can expire it even if the two clocks drift a little.
#[must_use]
pub fn drift_margin(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Adapter-specific state carried inside a [`Lease`] (an etcd lease id, a ZooKeeper
/// node path). Opaque to callers.
pub type BackendData = Arc<dyn Any + Send + Sync>;

/// A held lock: what `try_acquire`, `acquire` and `renew` return.
///
/// `valid_until` is a local monotonic deadline computed from the moment the request
/// that obtained (or renewed) the lease was *sent*, plus the TTL, minus
/// [`drift_margin`]. The server cannot expire the lease before then, so work done
/// before `valid_until` is protected; after it, only the fencing token protects you.
#[derive(Clone)]
pub struct Lease {
    name: LockName,
    owner: OwnerId,
    token: FencingToken,
    ttl: Duration,
    valid_until: Instant,
    access: Access,
    backend: Option<BackendData>,
    fallback: Option<crate::Fallback>,
    /// Set once the lease was handed over for a ticket; shared by every clone and
    /// renewal of it (one acquisition, one mark).
    handed_over: Arc<AtomicBool>,
}

impl Lease {
    /// Builds a lease for a request sent at `sent_at` that the server granted with `ttl`.
    #[must_use]
    pub fn new(
        name: LockName,
        owner: OwnerId,
        token: FencingToken,
        ttl: Duration,
        sent_at: Instant,
    ) -> Self {
        Self {
            name,
            owner,
            token,
            ttl,
            valid_until: valid_until(sent_at, ttl),
            access: Access::Exclusive,
            backend: None,
            fallback: None,
            handed_over: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The same lease marked as served by a [`crate::Fallback`] instead of the lock
    /// service.
    #[must_use]
    pub fn with_fallback(mut self, fallback: crate::Fallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// `Some` when this lease did not come from the lock service but from a
    /// [`crate::FallbackLock`] during an outage: [`crate::Fallback::Local`] (excludes
    /// this process's callers only) or [`crate::Fallback::Proceed`] (excludes nobody).
    #[must_use]
    pub fn fallback(&self) -> Option<crate::Fallback> {
        self.fallback
    }

    /// The same lease marked as a grant of `access` (leases are
    /// [`Access::Exclusive`] unless marked): a semaphore's permit, a reader, a writer.
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Attaches adapter-specific state, read back with [`Lease::backend_data`].
    #[must_use]
    pub fn with_backend_data(mut self, data: BackendData) -> Self {
        self.backend = Some(data);
        self
    }

    /// The same lease renewed by a request sent at `sent_at` with `ttl`.
    #[must_use]
    pub fn renewed(&self, ttl: Duration, sent_at: Instant) -> Self {
        Self {
            ttl,
            valid_until: valid_until(sent_at, ttl),
            ..self.clone()
        }
    }

    /// The same lease trusted at most until `until`: for a backend that knows a
    /// tighter bound than the TTL less [`drift_margin`] (a ZooKeeper ticket's node is
    /// deleted by the servers' wall clocks, which may differ). Never later than it was.
    #[must_use]
    pub fn narrowed(mut self, until: Instant) -> Self {
        self.valid_until = self.valid_until.min(until);
        self
    }

    /// Whether this lease was handed over for a [`crate::Ticket`]
    /// ([`crate::DistributedLock::hand_over`]): the ticket's taker holds it now, so here
    /// it is neither renewed (`LeaseLost`) nor released (`false`, nothing touched) —
    /// a guard dropped after the hand-over cannot take the lock from the ticket.
    #[must_use]
    pub fn is_handed_over(&self) -> bool {
        self.handed_over.load(Ordering::Acquire)
    }

    /// Marks this lease, its clones and its renewals as handed over (see
    /// [`Lease::is_handed_over`]); done by `hand_over` once the ticket is written.
    pub fn mark_handed_over(&self) {
        self.handed_over.store(true, Ordering::Release);
    }

    /// The lock name.
    #[must_use]
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The owner id of this acquisition (unique per acquisition).
    #[must_use]
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The fencing token.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The holder value this lease was taken with, if any
    /// ([`crate::DistributedLock::acquire_with_value`]).
    #[must_use]
    pub fn value(&self) -> Option<crate::HolderValue> {
        self.owner.holder_value()
    }

    /// How this lease shares its name: the mutex, a permit, a reader or a writer.
    #[must_use]
    pub fn access(&self) -> Access {
        self.access
    }

    /// The TTL the backend enforces (may be rounded up from the requested one).
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The local monotonic instant until which the lease is certainly valid.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Time left before `valid_until` (zero once passed).
    #[must_use]
    pub fn remaining(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// `true` while `valid_until` is in the future.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.valid_until
    }

    /// Adapter-specific state of type `T`, if this lease carries one.
    #[must_use]
    pub fn backend_data<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.backend.as_deref().and_then(|d| d.downcast_ref::<T>())
    }

    /// Adapter-specific state of type `T` for a renewal: a lease without it was not
    /// handed out by this backend, so there is nothing it could extend.
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when the lease carries no `T`.
    pub fn renewable_data<T: Any + Send + Sync>(&self) -> Result<&T, LockError> {
        self.backend_data::<T>()
            .ok_or_else(|| LockError::lease_lost(&self.name))
    }
}

fn valid_until(sent_at: Instant, ttl: Duration) -> Instant {
    sent_at + ttl.saturating_sub(drift_margin(ttl))
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("access", &self.access)
            .field("fallback", &self.fallback)
            .field("ttl", &self.ttl)
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

/// What [`crate::DistributedLock::inspect`] reports about the current holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// The holder's owner id.
    pub owner: OwnerId,
    /// The holder's fencing token.
    pub token: FencingToken,
    /// Time until the server expires the lease, as the server sees it. On a
    /// per-session backend (ZooKeeper, [`crate::LeaseScope::PerSession`]) the lease
    /// lasts as long as its holder's session, whose timeout other clients cannot read:
    /// this is the observing client's own session timeout, not the holder's.
    pub remaining: Duration,
    /// The value the holder proclaimed last ([`crate::DistributedLock::proclaim`]),
    /// if it did; [`LockInfo::value`] reads it first.
    pub proclaimed: Option<crate::HolderValue>,
}

/// A held lock, as [`crate::DistributedLock::list`] reports it: a mutex's holder, or
/// one holder of a semaphore's permit or a read-write lock's side (a name held by
/// three readers is listed three times).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Held {
    /// The lock's name.
    pub name: LockName,
    /// How it is held: [`crate::Access::Exclusive`] for the mutex.
    pub access: crate::Access,
    /// Its holder.
    pub holder: LockInfo,
    /// How many wait for it, where the backend can tell (etcd, ZooKeeper: the queue
    /// behind the holder); `None` where waiters leave no trace (they poll or listen).
    pub waiters: Option<usize>,
}

impl Held {
    /// A held mutex.
    #[must_use]
    pub fn new(name: LockName, holder: LockInfo, waiters: Option<usize>) -> Self {
        Self {
            name,
            access: crate::Access::Exclusive,
            holder,
            waiters,
        }
    }

    /// One holder of `name`'s semaphore or read-write lock, as
    /// [`crate::DistributedLock::holders`] describes it.
    #[must_use]
    pub fn shared(name: LockName, holding: crate::Holding) -> Self {
        Self {
            name,
            access: holding.access,
            holder: LockInfo {
                owner: holding.owner,
                token: holding.token,
                remaining: holding.remaining,
                proclaimed: None,
            },
            waiters: None,
        }
    }
}

impl LockInfo {
    /// What the holder says about itself: the value it proclaimed last
    /// ([`crate::DistributedLock::proclaim`]), else the one it acquired with
    /// ([`crate::DistributedLock::acquire_with_value`]), if any.
    #[must_use]
    pub fn value(&self) -> Option<crate::HolderValue> {
        self.proclaimed
            .clone()
            .or_else(|| self.owner.holder_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_until_subtracts_drift_from_send_time() {
        let sent = Instant::now();
        let ttl = Duration::from_secs(10);
        let lease = Lease::new(
            LockName::new("x").unwrap(),
            OwnerId::random().unwrap(),
            FencingToken::new(1),
            ttl,
            sent,
        );
        assert_eq!(lease.valid_until(), sent + ttl - Duration::from_millis(102));
        assert!(lease.is_valid());
        let later = sent + Duration::from_secs(1);
        let renewed = lease.renewed(ttl, later);
        assert_eq!(
            renewed.valid_until(),
            later + ttl - Duration::from_millis(102)
        );
        assert_eq!(renewed.token(), lease.token());
        assert_eq!(renewed.owner(), lease.owner());
    }

    #[test]
    fn backend_data_downcasts() {
        let lease = Lease::new(
            LockName::new("x").unwrap(),
            OwnerId::random().unwrap(),
            FencingToken::new(1),
            Duration::from_secs(1),
            Instant::now(),
        )
        .with_backend_data(Arc::new(42_i64));
        assert_eq!(lease.backend_data::<i64>(), Some(&42));
        assert_eq!(lease.backend_data::<u8>(), None);
        assert!(matches!(
            lease.renewable_data::<u8>(),
            Err(LockError::LeaseLost { .. })
        ));
    }
}
