//! The trait every backend implements.

use std::time::Duration;

use async_trait::async_trait;

use crate::{Capabilities, Lease, LockError, LockInfo, LockName};

/// The shortest TTL accepted: below this the drift margin would eat the lease.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest TTL accepted (7 days). Longer work should renew (see [`crate::Locker`]).
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

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
/// 8. a release wakes one waiter, not all of them.
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
    /// Takes the lock if it is free; `Ok(None)` if someone else holds it.
    ///
    /// # Cancel safety
    /// Dropping the future after its request was sent may leave the lock taken by an
    /// owner nobody holds, until its TTL (rule 6).
    async fn try_acquire(&self, name: &LockName, ttl: Duration)
    -> Result<Option<Lease>, LockError>;

    /// Takes the lock, waiting up to `wait` for the holder to release it or for its
    /// lease to expire. `wait == 0` makes a single attempt.
    ///
    /// A transient error ([`LockError::Unavailable`]: the server did not answer, a
    /// member went away) does not end the wait: the acquisition is tried again until
    /// `wait` runs out, and then ends with that error rather than `Timeout`, so the
    /// caller can tell an outage from a busy lock. Every backend keeps this rule.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when `wait` runs out on a busy lock;
    /// [`LockError::Unavailable`] when it runs out during an outage.
    ///
    /// # Cancel safety
    /// Dropping the future at any await leaves the queue or gives up the attempt; what
    /// a request already sent may still take is gone by its TTL at the latest (rule 6,
    /// checked by `cancelled_acquires_leak_nothing`).
    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError>;

    /// Extends the lease by its TTL from now.
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] if the lease is no longer held.
    ///
    /// # Cancel safety
    /// Dropping the future is harmless: the lease keeps the expiry of the last renewal
    /// that was answered (one that lands anyway only extends it).
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

    /// What this backend guarantees beyond the rules above.
    fn capabilities(&self) -> Capabilities;

    /// A short name of the backend for logs and metrics (`"redis"`, `"sqlite"`, …).
    fn backend_name(&self) -> &'static str {
        "unknown"
    }
}

/// Checks a requested TTL against [`MIN_TTL`] and [`MAX_TTL`].
///
/// # Errors
/// [`LockError::InvalidArgument`] when it is out of range.
pub fn validate_ttl(ttl: Duration) -> Result<(), LockError> {
    if ttl < MIN_TTL {
        return Err(LockError::InvalidArgument(format!(
            "ttl {ttl:?} is shorter than the minimum {MIN_TTL:?}"
        )));
    }
    if ttl > MAX_TTL {
        return Err(LockError::InvalidArgument(format!(
            "ttl {ttl:?} is longer than the maximum {MAX_TTL:?}; renew instead"
        )));
    }
    Ok(())
}
