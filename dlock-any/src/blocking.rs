//! The same locks for synchronous code: [`connect`], [`Locker`] and [`LockGuard`] with
//! the async API's names, run on a small runtime of their own, so a program without
//! tokio (or a thread that must not be async) takes and holds locks while its guards
//! keep renewing in the background.
//!
//! ```
//! use std::time::Duration;
//! use dlock_any::blocking;
//!
//! # fn main() -> Result<(), dlock_any::LockError> {
//! // e.g. "postgres://app@db/app" or "sqlite:///var/lib/app/locks.db"
//! let backend = blocking::connect("memory://")?;
//! let locker = blocking::Locker::new(&backend).with_ttl(Duration::from_secs(15));
//!
//! let written = locker.with_lock("stock/sku-123", |guard| {
//!     // pass guard.token() with every write; check guard.is_held() between steps
//!     guard.token().get()
//! })?;
//! assert_eq!(written, 1);
//!
//! let guard = locker.lock("stock/sku-123")?;
//! assert!(locker.try_lock("stock/sku-123")?.is_none()); // busy: skip, as flock -n does
//! guard.release()?;
//! # Ok(()) }
//! ```
//!
//! Each [`connect`] starts one runtime thread (`dlock-blocking`) that serves that
//! backend's connections and every guard's renewals: connect once and clone. The
//! calls block the calling thread; from async code use [`crate::Locker`] instead (a
//! blocking call there would stall one of the runtime's worker threads). When the last
//! handle of a backend is dropped outside async code, the clean-ups still running in
//! the process (the releases of guards dropped without [`LockGuard::release`]) are
//! given up to 5 s to finish before its runtime stops.

use std::sync::Arc;

use std::time::Duration;

use dlock_core::{HolderValue, LockError, ToLockName};

use crate::DistributedLock;

mod engine;
mod guard;

use engine::{Engine, OnEngine};
pub use guard::LockGuard;
use guard::under;

/// A connected backend for blocking code (cheap to clone: clones share the
/// connections and the runtime thread).
#[derive(Clone)]
pub struct Backend {
    // Declared first, so dropped first: only a count goes down here, while `kept`
    // holds another reference. Whatever holds a plain clone of the lock also holds
    // a `kept` (directly or through a guard's `OnEngine`) and drops it later, so the
    // last reference always goes inside the runtime.
    lock: Arc<dyn DistributedLock>,
    kept: Arc<OnEngine<Arc<dyn DistributedLock>>>,
}

/// Connects to the backend the URL names, as [`crate::connect`] does, on a runtime
/// thread of its own.
///
/// # Errors
/// As [`crate::connect`], and [`LockError::Unavailable`] if the runtime cannot start.
pub fn connect(url: &str) -> Result<Backend, LockError> {
    let engine = Engine::start()?;
    let url = url.to_owned();
    let lock = engine.run(async move { crate::connect(&url).await })?;
    Ok(Backend {
        lock: Arc::clone(&lock),
        kept: Arc::new(OnEngine::new(lock, engine)),
    })
}

impl Backend {
    /// The async backend, for the calls this module does not wrap (`inspect`,
    /// `list`, …). Its connections are served by this backend's runtime thread: await
    /// its futures on any runtime, but keep this `Backend` (or a guard) alive while
    /// you do.
    #[must_use]
    pub fn lock(&self) -> Arc<dyn DistributedLock> {
        Arc::clone(&self.lock)
    }

    fn engine(&self) -> &Arc<Engine> {
        &self.kept.engine
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("backend", &self.lock.backend_name())
            .finish()
    }
}

/// [`crate::Locker`] for blocking code: the same defaults (30 s TTL, 30 s wait), hold
/// limits and holder value.
#[derive(Clone)]
pub struct Locker {
    // before `backend`, for the drop order `Backend` explains
    inner: dlock_core::Locker,
    backend: Backend,
}

impl Locker {
    /// A locker over `backend` with a 30 s TTL and a 30 s wait.
    #[must_use]
    pub fn new(backend: &Backend) -> Self {
        Self {
            inner: dlock_core::Locker::new(backend.lock()),
            backend: backend.clone(),
        }
    }

    /// As [`crate::Locker::with_ttl`].
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.inner = self.inner.with_ttl(ttl);
        self
    }

    /// As [`crate::Locker::with_wait`].
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.inner = self.inner.with_wait(wait);
        self
    }

    /// As [`crate::Locker::with_max_hold`] (lockAtMostFor): at the cap the guard stops
    /// renewing and reports [`dlock_core::GuardState::Expired`].
    #[must_use]
    pub fn with_max_hold(mut self, max_hold: Duration) -> Self {
        self.inner = self.inner.with_max_hold(max_hold);
        self
    }

    /// As [`crate::Locker::with_min_hold`] (lockAtLeastFor).
    #[must_use]
    pub fn with_min_hold(mut self, min_hold: Duration) -> Self {
        self.inner = self.inner.with_min_hold(min_hold);
        self
    }

    /// As [`crate::Locker::with_value`].
    #[must_use]
    pub fn with_value(mut self, value: HolderValue) -> Self {
        self.inner = self.inner.with_value(value);
        self
    }

    /// Waits up to the locker's wait for `name`; the guard renews in the background.
    ///
    /// # Errors
    /// As [`crate::Locker::lock`].
    pub fn lock(&self, name: impl ToLockName) -> Result<LockGuard, LockError> {
        self.lock_within(name, self.inner.wait_limit())
    }

    /// As [`Locker::lock`], waiting up to `wait`.
    ///
    /// # Errors
    /// As [`crate::Locker::lock`].
    pub fn lock_within(
        &self,
        name: impl ToLockName,
        wait: Duration,
    ) -> Result<LockGuard, LockError> {
        let (name, inner) = (name.to_lock_name()?, self.inner.clone());
        let guard = self
            .backend
            .engine()
            .run(async move { inner.lock_within(&name, wait).await })?;
        Ok(self.wrap(guard))
    }

    /// Takes `name` if it is free now; `Ok(None)` when someone holds it.
    ///
    /// # Errors
    /// As [`crate::Locker::try_lock`].
    pub fn try_lock(&self, name: impl ToLockName) -> Result<Option<LockGuard>, LockError> {
        let (name, inner) = (name.to_lock_name()?, self.inner.clone());
        let guard = self
            .backend
            .engine()
            .run(async move { inner.try_lock(&name).await })?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Runs `work` under the lock and releases it afterwards. A thread cannot be
    /// cancelled as a future can, so `work` runs to its end: check
    /// [`LockGuard::is_held`] between steps and pass [`LockGuard::token`] with every
    /// write. If the lease was lost (or the hold reached its cap) by the end, the
    /// result is dropped and the answer is [`LockError::LeaseLost`]
    /// ([`LockError::HoldExpired`]), as [`crate::Locker::with_lock`] answers.
    ///
    /// # Errors
    /// Those of [`Locker::lock`], [`LockError::LeaseLost`] and
    /// [`LockError::HoldExpired`].
    pub fn with_lock<T>(
        &self,
        name: impl ToLockName,
        work: impl FnOnce(&LockGuard) -> T,
    ) -> Result<T, LockError> {
        let guard = self.lock(name)?;
        under(guard, work)
    }

    /// As [`Locker::with_lock`] if `name` is free now; `Ok(None)` without running
    /// `work` while someone holds it (a scheduled job that runs on one host per tick).
    ///
    /// # Errors
    /// As [`Locker::with_lock`].
    pub fn try_with_lock<T>(
        &self,
        name: impl ToLockName,
        work: impl FnOnce(&LockGuard) -> T,
    ) -> Result<Option<T>, LockError> {
        match self.try_lock(name)? {
            Some(guard) => under(guard, work).map(Some),
            None => Ok(None),
        }
    }

    fn wrap(&self, guard: dlock_core::LockGuard) -> LockGuard {
        LockGuard {
            inner: OnEngine::new(guard, Arc::clone(self.backend.engine())),
        }
    }
}

impl std::fmt::Debug for Locker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locker")
            .field("backend", &self.backend)
            .field("ttl", &self.inner.ttl())
            .field("wait", &self.inner.wait_limit())
            .finish_non_exhaustive()
    }
}
