//! A semaphore's permits, a read-write lock's read side or its write side, seen as a
//! [`DistributedLock`]: so [`crate::Locker`], [`crate::LockGuard`] (watchdog,
//! `lost()`), `with_lock`, instrumentation and the CLI work on them unchanged.
//!
//! ```
//! use std::sync::Arc;
//! use dlock_core::{Locker, MemoryLock, SharedLock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let backend = Arc::new(MemoryLock::new());
//! let pool = Locker::new(Arc::new(SharedLock::permits(backend.clone(), 3)?));
//! let first = pool.lock("db/connections").await?; // one of three
//! let second = pool.lock("db/connections").await?;
//!
//! let readers = Locker::new(Arc::new(SharedLock::reads(backend.clone())));
//! let writers = Locker::new(Arc::new(SharedLock::writes(backend)));
//! let r = readers.lock("docs/7").await?;
//! assert!(writers.try_lock("docs/7").await?.is_none());
//! r.release().await?;
//! assert!(writers.try_lock("docs/7").await?.is_some());
//! # first.release().await?; second.release().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Access, Capabilities, Coordination, DistributedLock, Lease, LockError, LockInfo, LockName,
};

/// One side of a backend's semaphores or read-write locks as a lock: `acquire` takes a
/// permit (of a fixed count), a read lease or the write lease; `inspect` reports a
/// holder: the writer of a read-write lock if there is one, else the latest grant.
#[derive(Clone)]
pub struct SharedLock {
    backend: Arc<dyn Coordination>,
    access: Access,
}

impl SharedLock {
    /// Permits of `backend`'s semaphores, `permits` per name.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for a count outside 1 to [`crate::MAX_PERMITS`].
    pub fn permits(backend: Arc<dyn Coordination>, permits: u32) -> Result<Self, LockError> {
        let access = Access::Permit(permits).validate()?;
        Ok(Self { backend, access })
    }

    /// Read leases of `backend`'s read-write locks.
    #[must_use]
    pub fn reads(backend: Arc<dyn Coordination>) -> Self {
        Self {
            backend,
            access: Access::Read,
        }
    }

    /// Write leases of `backend`'s read-write locks.
    #[must_use]
    pub fn writes(backend: Arc<dyn Coordination>) -> Self {
        Self {
            backend,
            access: Access::Write,
        }
    }

    /// What this side takes.
    #[must_use]
    pub fn access(&self) -> Access {
        self.access
    }
}

#[async_trait]
impl DistributedLock for SharedLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        match self.access {
            Access::Permit(n) => self.backend.try_acquire_permit(name, n, ttl).await,
            Access::Write => self.backend.try_write(name, ttl).await,
            _ => self.backend.try_read(name, ttl).await,
        }
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        match self.access {
            Access::Permit(n) => self.backend.acquire_permit(name, n, ttl, wait).await,
            Access::Write => self.backend.write(name, ttl, wait).await,
            _ => self.backend.read(name, ttl, wait).await,
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.backend.renew(lease).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.backend.release(lease).await
    }

    // The backend knows how to cut its own leases (a permit's or a reader's too).
    // `holder_changed` keeps the provided polling: the backend's watches follow the
    // mutex's holder, not this side's.
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.backend.release_after(lease, linger).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let mut holders = match self.access {
            Access::Permit(_) => self.backend.permit_holders(name).await?,
            _ => self.backend.rw_holders(name).await?,
        };
        // the latest grant; on a read-write lock the writer first, since that is
        // whom either side waits for
        let writer = holders.iter().position(|h| h.access == Access::Write);
        let chosen = match writer {
            Some(i) => Some(holders.swap_remove(i)),
            None => holders.into_iter().max_by_key(|h| h.token),
        };
        Ok(chosen.map(|h| LockInfo {
            owner: h.owner,
            token: h.token,
            remaining: h.remaining,
        }))
    }

    fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    fn backend_name(&self) -> &'static str {
        self.backend.backend_name()
    }
}
