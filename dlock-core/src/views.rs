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

use crate::{Access, Acquisition, DistributedLock, Lease, LockError, LockInfo, LockName};

/// What a [`SharedLock`] can view: an `Arc` of any lock — `Arc<dyn DistributedLock>`,
/// `Arc<dyn Coordination>` (what `dlock_any::connect_coordination` returns), or a
/// concrete backend's.
pub trait ViewedBackend {
    /// The backend as a shared lock object.
    fn into_backend(self) -> Arc<dyn DistributedLock>;
}

impl ViewedBackend for Arc<dyn DistributedLock> {
    fn into_backend(self) -> Arc<dyn DistributedLock> {
        self
    }
}

impl ViewedBackend for Arc<dyn crate::Coordination> {
    fn into_backend(self) -> Arc<dyn DistributedLock> {
        self
    }
}

impl<T: DistributedLock + 'static> ViewedBackend for Arc<T> {
    fn into_backend(self) -> Arc<dyn DistributedLock> {
        self
    }
}

/// One side of a backend's semaphores or read-write locks as a lock: a mutex
/// acquisition through it takes a permit (of a fixed count), a read lease or the write
/// lease, with its holder value; `inspect` reports a holder: the writer of a
/// read-write lock if there is one, else the latest grant.
#[derive(Clone)]
pub struct SharedLock {
    backend: Arc<dyn DistributedLock>,
    access: Access,
}

impl SharedLock {
    /// Permits of `backend`'s semaphores, `permits` per name.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for a count outside 1 to [`crate::MAX_PERMITS`].
    pub fn permits(backend: impl ViewedBackend, permits: u32) -> Result<Self, LockError> {
        let access = Access::Permit(permits).validate()?;
        Ok(Self {
            backend: backend.into_backend(),
            access,
        })
    }

    /// Read leases of `backend`'s read-write locks.
    #[must_use]
    pub fn reads(backend: impl ViewedBackend) -> Self {
        Self {
            backend: backend.into_backend(),
            access: Access::Read,
        }
    }

    /// Write leases of `backend`'s read-write locks.
    #[must_use]
    pub fn writes(backend: impl ViewedBackend) -> Self {
        Self {
            backend: backend.into_backend(),
            access: Access::Write,
        }
    }

    /// What this side takes.
    #[must_use]
    pub fn access(&self) -> Access {
        self.access
    }
}

impl crate::Delegating for SharedLock {
    type Inner = dyn DistributedLock;

    fn delegate(&self) -> &(dyn DistributedLock + 'static) {
        &*self.backend
    }
}

// The backend knows how to renew and cut its own leases (a permit's or a reader's
// too). `holder_changed` keeps the provided polling: the backend's watches follow the
// mutex's holder, not this side's. `break_holder` and `revoke_holder` too: `name`'s
// mutex is another lock than this side's, and breaking it here would break the wrong
// holder, so a view answers that it cannot (the trait's default).
crate::delegate_lock! {
    impl [] for SharedLock;
    forward [holders, renew, release, release_after, hand_over, resume, proclaim, list,
        diagnose, capabilities, backend_name];
    {
        async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
            // a mutex acquisition through this side is this side's; any other passes as is
            let request = match request.access() {
                Access::Exclusive => request.with_access(self.access),
                _ => *request,
            };
            self.backend.acquire_with(&request).await
        }

        async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
            let mut holders = self.backend.holders(name, self.access).await?;
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
                proclaimed: None,
            }))
        }
    }
}
