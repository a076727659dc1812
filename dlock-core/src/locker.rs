//! `Locker`: acquisition with a default TTL and wait, handing out self-renewing
//! [`LockGuard`]s.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{DistributedLock, FencingToken, LockError, LockGuard, LockName};

/// Acquires locks with default TTL and wait, and hands out [`LockGuard`]s that renew
/// themselves.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use dlock_core::{Locker, MemoryLock};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let locker = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::from_secs(10));
/// let total = locker
///     .with_lock("reports/daily", |token| async move {
///         // write to the resource, passing `token` along
///         token.get()
///     })
///     .await?;
/// assert_eq!(total, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    lock: Arc<dyn DistributedLock>,
    ttl: Duration,
    wait: Duration,
    name_label: bool,
}

/// Default lease TTL of a [`Locker`].
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default `acquire` wait of a [`Locker`].
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

impl Locker {
    /// A locker over `lock` with a 30 s TTL and a 30 s wait.
    #[must_use]
    pub fn new(lock: Arc<dyn DistributedLock>) -> Self {
        Self {
            lock,
            ttl: DEFAULT_TTL,
            wait: DEFAULT_WAIT,
            name_label: false,
        }
    }

    /// Labels the guards' metrics with the lock name too (one series per name: mind
    /// the cardinality). See [`crate::metric_names`].
    #[must_use]
    pub fn with_name_label(mut self, on: bool) -> Self {
        self.name_label = on;
        self
    }

    /// Sets the lease TTL; the watchdog renews at about a third of it.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets how long [`Locker::lock`] waits.
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &Arc<dyn DistributedLock> {
        &self.lock
    }

    /// Waits up to the default wait for `name` and returns a renewing guard.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Timeout`], or a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`]: dropping it leaks no lock beyond its TTL.
    pub async fn lock(&self, name: impl AsRef<str>) -> Result<LockGuard, LockError> {
        let name = LockName::new(name.as_ref())?;
        let lease = self.lock.acquire(&name, self.ttl, self.wait).await?;
        Ok(LockGuard::start(
            Arc::clone(&self.lock),
            lease,
            self.name_label,
        ))
    }

    /// Takes `name` if it is free.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] or a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    pub async fn try_lock(&self, name: impl AsRef<str>) -> Result<Option<LockGuard>, LockError> {
        let name = LockName::new(name.as_ref())?;
        let lease = self.lock.try_acquire(&name, self.ttl).await?;
        Ok(lease.map(|l| LockGuard::start(Arc::clone(&self.lock), l, self.name_label)))
    }

    /// Runs `work` under the lock, passing it the fencing token, and releases the lock
    /// afterwards. If the lease is lost first, `work`'s future is dropped (cancelled) and
    /// the result is [`LockError::LeaseLost`].
    ///
    /// # Errors
    /// Those of [`Locker::lock`], and [`LockError::LeaseLost`].
    ///
    /// # Cancel safety
    /// Dropping it drops `work` and the guard, whose `Drop` releases the lock in the
    /// background.
    pub async fn with_lock<F, Fut, T>(&self, name: impl AsRef<str>, work: F) -> Result<T, LockError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock(name).await?;
        let lost = guard.lost();
        let name = guard.lease().name().clone();
        tokio::select! {
            biased;
            () = lost => {
                // owner-checked, so harmless if someone else holds it now
                let _ = guard.release().await;
                Err(LockError::lease_lost(&name))
            }
            out = work(guard.token()) => {
                if let Err(e) = guard.release().await {
                    tracing::warn!(lock = %name, error = %e, "release after with_lock failed; the lease will expire by its TTL");
                }
                Ok(out)
            }
        }
    }
}
