//! The trait every backend implements.

use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Access, Acquisition, Capabilities, Finding, Held, HolderValue, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, MIN_TTL, Ticket, poll_until, waited,
};

/// A distributed lock with leases, renewal and fencing tokens.
///
/// Every implementation keeps these rules (checked by the `dlock-conformance` suite):
/// 1. at most one unexpired lease per name;
/// 2. release and renew check the owner: a stale lease can neither release nor extend
///    a later holder's lock;
/// 3. the server expires a lease its client stopped renewing (the lock outlives a crashed
///    client by at most its TTL), by the server's clock;
/// 4. fencing tokens strictly increase across holders of one name;
/// 5. `acquire` only returns a lease that is still valid;
/// 6. dropping an `acquire` future leaks no lock beyond its TTL;
/// 7. waiting uses server notifications where the backend has them, and is bounded by
///    `wait`;
/// 8. a release wakes one waiter, not all of them;
/// 9. a waiter is not starved: a client that releases and asks again at once does not
///    keep it out past a bound (a queue's next release; for waiters that poll, ten
///    polling gaps).
///
/// The trait is object safe: services hold an `Arc<dyn DistributedLock>`.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{DistributedLock, LockName, MemoryLock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let locks: Arc<dyn DistributedLock> = Arc::new(MemoryLock::new());
/// let name = LockName::new("invoices/7")?;
/// let lease = locks.acquire(&name, Duration::from_secs(10), Duration::from_secs(1)).await?;
/// assert!(locks.try_acquire(&name, Duration::from_secs(10)).await?.is_none());
/// assert!(locks.release(&lease).await?);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait DistributedLock: Send + Sync {
    /// Takes what `request` describes — the mutex, a semaphore's permit, a reader or
    /// the writer of `request.name()`, with its holder value — at once, or waiting up
    /// to its wait. The one acquisition method a backend or a wrapper writes; every
    /// other way of taking a lock (`try_acquire`, `acquire`, the permit and read/write
    /// calls of [`crate::DistributedSemaphore`] and [`crate::DistributedRwLock`])
    /// builds an [`Acquisition`] and calls this.
    ///
    /// A single attempt (no wait) answers `Ok(None)` when the lock is busy. A wait
    /// answers a lease or an error, never `Ok(None)`. A transient error
    /// ([`LockError::Unavailable`]: the server did not answer, a member went away)
    /// does not end a wait: the acquisition is tried again until the wait runs out,
    /// and then ends with that error rather than `Timeout`, so the caller can tell an
    /// outage from a busy lock.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when a wait runs out on a busy lock;
    /// [`LockError::Unavailable`] when it runs out during an outage;
    /// `InvalidArgument` for a TTL or permit count out of range;
    /// [`LockError::PermitsMismatch`] for a permit count other than the one the name is
    /// held under (at once for a try, when the wait runs out otherwise: a waiter waits
    /// for the name to go idle); [`LockError::Unsupported`] for an access or a holder
    /// value the backend does not offer.
    ///
    /// # Cancel safety
    /// Dropping the future at any await leaves the queue or gives up the attempt; what
    /// a request already sent may still take is gone by its TTL at the latest (rule 6,
    /// checked by `cancelled_acquires_leak_nothing`).
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError>;

    /// Takes the lock if it is free; `Ok(None)` if someone else holds it.
    ///
    /// # Cancel safety
    /// Dropping the future after its request was sent may leave the lock taken by an
    /// owner nobody holds, until its TTL (rule 6).
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        self.acquire_with(&Acquisition::new(name, ttl)).await
    }

    /// Takes the lock, waiting up to `wait` for the holder to release it or for its
    /// lease to expire. `wait == 0` makes a single attempt.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when `wait` runs out on a busy lock;
    /// [`LockError::Unavailable`] when it runs out during an outage.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire_with`].
    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        waited(
            self.acquire_with(&Acquisition::new(name, ttl).waiting(wait))
                .await,
            name,
            wait,
        )
    }

    /// Renews the lease: from now, for its TTL.
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] if the lease is no longer held.
    ///
    /// # Cancel safety
    /// Dropping the future is harmless: the lease keeps the expiry of the last renewal
    /// that was answered (one that lands anyway only extends it) — except a renewal
    /// asking a shorter TTL than the last one, which may shorten it: treat such a lease
    /// as lost once its renewal was dropped.
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError>;

    /// Releases the lease. `Ok(false)` if it was not held (expired, taken over, or
    /// released before); calling it twice is harmless.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the lock held until its TTL; call again to be sure.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError>;

    /// The current holder of `name`, if any.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError>;

    /// The current holders of `name`'s semaphore (`of` an [`Access::Permit`]) or
    /// read-write lock (`of` [`Access::Read`] or [`Access::Write`]), oldest grant
    /// first.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] where the backend has no such primitive (the
    /// provided implementation); a backend error.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        let _ = name;
        Err(LockError::unsupported(self.backend_name(), of))
    }

    /// Breaks the current holder of `name`'s mutex, whoever it is — an operator's
    /// last resort for a stuck or runaway holder (`dlock release --force`; Redisson's
    /// `forceUnlock`). The holder's lease is removed on the server as its own release
    /// would remove it, waking the next waiter: the next grant carries a higher fencing
    /// token, the broken holder's renewals fail with [`LockError::LeaseLost`] (a
    /// [`crate::LockGuard`] turns lost, `dlock run` stops its command), and its writes
    /// are refused by every fenced store once the next holder's token has been seen
    /// there. Returns who was broken; `None` if nobody held it.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] where the backend cannot (the provided
    /// implementation); a backend error; [`LockError::Unavailable`] when the holder
    /// kept changing under it.
    ///
    /// # Cancel safety
    /// Dropping it may leave the holder broken or not; look with `inspect`.
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let _ = name;
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "breaking a holder",
        ))
    }

    /// Revokes the current holder of `name`'s mutex without letting anyone else in
    /// while it may still be at work — the operator's safe way to stop a holder
    /// (`dlock release --force`). Its lease is marked revoked on the server with its
    /// expiry unchanged: from then on its renewals fail with [`LockError::LeaseLost`]
    /// (a [`crate::LockGuard`] turns lost, `dlock run` stops its command before its
    /// lease could run out), and nobody else is granted the name until that lease has
    /// run out — on ZooKeeper, until the holder's session ends or the holder lets go.
    /// [`DistributedLock::break_holder`] hands the name on at once instead, for a
    /// holder known to be gone. The next grant carries a higher fencing token.
    /// Returns who was revoked; `None` if nobody held it (or, on etcd, it let go).
    ///
    /// # Errors
    /// [`LockError::Unsupported`] where the backend cannot (the provided
    /// implementation); a backend error; [`LockError::Unavailable`] when the holder
    /// kept changing under it.
    ///
    /// # Cancel safety
    /// Dropping it may leave the holder revoked or not; look with `inspect`.
    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let _ = name;
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "revoking a holder",
        ))
    }

    /// As [`DistributedLock::try_acquire`], with `value` stored with the lease: anyone
    /// reads it back through `inspect` ([`LockInfo::value`]) for as long as the lease
    /// holds — a leader's address, say.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] where the backend cannot store one.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    async fn try_acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        value: &HolderValue,
    ) -> Result<Option<Lease>, LockError> {
        self.acquire_with(&Acquisition::new(name, ttl).with_value(value))
            .await
    }

    /// As [`DistributedLock::acquire`], with `value` stored with the lease (see
    /// [`DistributedLock::try_acquire_with_value`]).
    ///
    /// # Errors
    /// As [`DistributedLock::acquire`]; [`LockError::Unsupported`] where the backend
    /// cannot store a value.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`].
    async fn acquire_with_value(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
        value: &HolderValue,
    ) -> Result<Lease, LockError> {
        let request = Acquisition::new(name, ttl).waiting(wait).with_value(value);
        waited(self.acquire_with(&request).await, name, wait)
    }

    /// Releases the lease but keeps the name blocked for `linger` more (a lock-delay,
    /// see [`crate::Locker::with_min_hold`]): the lease's TTL is cut to `linger` on the
    /// server, so the name frees itself then even if this process dies right after.
    /// `Ok(false)` if the lease was no longer held.
    ///
    /// The provided implementation renews the lease with a TTL of `linger`, which every
    /// backend whose renewal sets the lease's TTL (Redis, SQL, memory) keeps exactly;
    /// a backend whose renewal cannot shorten a lease overrides it.
    ///
    /// # Errors
    /// A backend error; the lease then expires by its TTL, which is longer.
    ///
    /// # Cancel safety
    /// Dropping it leaves the lease held until its TTL at the latest.
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        if linger.is_zero() {
            return self.release(lease).await;
        }
        // a lease is never shorter than MIN_TTL: holding a few ms longer is safe
        match self
            .renew(&lease.renewed(linger.max(MIN_TTL), tokio::time::Instant::now()))
            .await
        {
            Ok(_) => Ok(true),
            Err(LockError::LeaseLost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Completes when the holder of `watch.name` may no longer be `watch.seen`
    /// (released, expired, replaced, or a holder appeared), or at `watch.until`. Callers inspect again:
    /// a wake-up may be spurious, never missed for long. Backends with server
    /// notifications ([`Capabilities::notify`]) are woken by them; the provided
    /// implementation polls every 100 ms at most.
    ///
    /// # Errors
    /// A backend error while setting up the wait.
    ///
    /// # Cancel safety
    /// A wait: dropping it changes nothing.
    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        tokio::time::sleep_until(poll_until(watch.seen, watch.until)).await;
        Ok(())
    }

    /// Writes `lease` down as a [`Ticket`] for another process to take up with
    /// [`DistributedLock::resume`] — `dlock acquire` hands its lease over this way.
    /// From then on the lease is the ticket's: renewing `lease` here answers
    /// [`LockError::LeaseLost`], releasing it answers `false` and touches nothing (a
    /// guard dropped after the hand-over cannot take the lock from the ticket's taker;
    /// [`crate::LockGuard::hand_over`] does both steps), and only a lease taken up
    /// from the ticket renews or releases it. What moves on the server is the
    /// backend's business (its crate docs say): most only write the ticket (the lease
    /// is the stored row or key); etcd and ZooKeeper move the lock off this client's
    /// session first.
    ///
    /// # Errors
    /// Those of [`Ticket::of`]; [`LockError::LeaseLost`] when the lease is no longer
    /// held here (handed over already, too); [`LockError::InvalidArgument`] on etcd for a lease another client took;
    /// [`LockError::Unsupported`] on ZooKeeper servers without TTL nodes (the lease
    /// stays held here); a backend error — on etcd the lease is given up then (the key
    /// is deleted, or ends with the lease it moved to), on ZooKeeper it is still held
    /// here or lives in a TTL node that nobody renews, and ends with its TTL.
    ///
    /// # Cancel safety
    /// Dropped on etcd once started, the lease is given up as on an error; on
    /// ZooKeeper it is held here still, or ends with its TTL, as on an error.
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        Ticket::of(self.backend_name(), lease)
    }

    /// Takes up the lease a [`Ticket`] wrote down — in this process or another — so it
    /// can be renewed and released here. Its `valid_until` is what the server says is
    /// left of it (on ZooKeeper, whose servers alone know that, taking it up renews it
    /// with the TTL it has).
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when the ticket's lease is no longer held (expired,
    /// released, taken over); [`LockError::InvalidArgument`] for a ticket of another
    /// backend, or (etcd, ZooKeeper) one not written by [`DistributedLock::hand_over`];
    /// [`LockError::Unsupported`] where a lease cannot leave its process (a memory lock
    /// is the process's own).
    ///
    /// # Cancel safety
    /// A read (on ZooKeeper a renewal): dropping it changes nothing held.
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        let _ = ticket;
        Err(crate::ticket::unsupported(self.backend_name()))
    }

    /// Stores `value` with `lease` as what its holder now says about itself — a
    /// leader's new address, say ([`crate::Leadership::proclaim`], etcd's `Proclaim`):
    /// the lease, its token and its owner id stay as they are, and
    /// [`DistributedLock::inspect`] reports `value` ([`LockInfo::value`]) until the
    /// lease ends or the holder proclaims again. Written on the server only while the
    /// lease holds, in its key, node or row or beside it (a Redis `…:value` key, an SQL
    /// `<table>_values` row, both naming the holder's owner id), and read back only
    /// with that holder, so a value never passes to the next one. A hand-over for a
    /// ticket (etcd, ZooKeeper) drops the value: the key or node then carries the
    /// ticket.
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when the lease is no longer held (or past its
    /// `valid_until`, or handed over from this lease);
    /// [`LockError::Unsupported`] for a semaphore's permit or a side of a read-write
    /// lock, a fallback lease, a lease taken up from a ticket (etcd, ZooKeeper), or
    /// where the backend cannot store a value; a backend error (the value then is the
    /// old one or the new one).
    ///
    /// # Cancel safety
    /// Dropped once sent, the value is the old one or the new one.
    async fn proclaim(&self, lease: &Lease, value: &HolderValue) -> Result<(), LockError> {
        let _ = (lease, value);
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "proclaiming a holder value",
        ))
    }

    /// The locks held now whose names start with `prefix` (all with `""`), by name:
    /// each mutex's holder and, where the backend can tell, how many wait for it; and
    /// each holder of a semaphore's permit or a read-write lock's side, one entry each
    /// ([`Held::access`] says which), where the backend has those.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] where the backend cannot enumerate its locks.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let _ = prefix;
        Err(LockError::Unsupported {
            backend: self.backend_name(),
            what: "listing its locks".into(),
        })
    }

    /// What decides whether locking here is safe and fast, as the server reports it:
    /// its version, its clock's offset from this host, its durability and eviction
    /// settings, its cluster's health (`dlock doctor` prints them). Empty where the
    /// backend has nothing to check.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the server cannot be asked.
    ///
    /// # Cancel safety
    /// Reads only (a PostgreSQL check sends one notification to itself): dropping it
    /// changes nothing.
    async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        Ok(Vec::new())
    }

    /// What this backend guarantees beyond the rules above.
    fn capabilities(&self) -> Capabilities;

    /// A short name of the backend for logs and metrics (`"redis"`, `"sqlite"`, …).
    fn backend_name(&self) -> &'static str {
        "unknown"
    }
}
