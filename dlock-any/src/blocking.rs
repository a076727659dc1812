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

use std::future::Future;
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use dlock_core::{FencingToken, GuardState, HolderValue, Lease, LockError, LockName, ToLockName};

use crate::DistributedLock;

/// How long the last handle's drop waits for dropped guards' releases.
const SETTLE_ON_DROP: Duration = Duration::from_secs(5);

/// The runtime one blocking backend runs on.
struct Engine {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Engine {
    fn start() -> Result<Arc<Self>, LockError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dlock-blocking")
            .enable_all()
            .build()
            .map_err(|e| LockError::unavailable("cannot start the blocking API's runtime", e))?;
        Ok(Arc::new(Self {
            runtime: Some(runtime),
        }))
    }

    /// Runs `work` on the runtime and blocks this thread for its answer. Spawned
    /// rather than `block_on`, so it works from any thread, async ones included,
    /// without tokio's nested-runtime panic.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, LockError>> + Send + 'static,
    ) -> Result<T, LockError> {
        let runtime = self.runtime()?;
        let (tx, rx) = sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv()
            .map_err(|_| LockError::transient("the blocking API's runtime stopped"))?
    }

    fn runtime(&self) -> Result<&tokio::runtime::Runtime, LockError> {
        self.runtime
            .as_ref()
            .ok_or_else(|| LockError::transient("the blocking API's runtime stopped"))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Inside a runtime (the last handle dropped in async code) this thread may be
        // the one that would run the clean-ups it waited for: do not block it.
        let inside_a_runtime = tokio::runtime::Handle::try_current().is_ok();
        if !inside_a_runtime && dlock_core::pending_cleanups() > 0 {
            let (tx, rx) = sync_channel(1);
            runtime.spawn(async move {
                let _ = tx.send(dlock_core::settle(SETTLE_ON_DROP).await);
            });
            let _ = rx.recv_timeout(SETTLE_ON_DROP + Duration::from_secs(1));
        }
        // never blocks, so dropping the last handle inside async code cannot panic
        runtime.shutdown_background();
    }
}

/// A value from the async API kept with the runtime it lives on, and dropped inside
/// it: a connection, guard or task handle may need the runtime to close.
struct OnEngine<T> {
    value: Option<T>,
    engine: Arc<Engine>,
}

impl<T> OnEngine<T> {
    fn new(value: T, engine: Arc<Engine>) -> Self {
        Self {
            value: Some(value),
            engine,
        }
    }

    fn get(&self) -> Result<&T, LockError> {
        self.value
            .as_ref()
            .ok_or_else(|| LockError::transient("already released"))
    }

    fn take(&mut self) -> Result<T, LockError> {
        self.value
            .take()
            .ok_or_else(|| LockError::transient("already released"))
    }
}

impl<T> Drop for OnEngine<T> {
    fn drop(&mut self) {
        if let (Some(value), Ok(runtime)) = (self.value.take(), self.engine.runtime()) {
            let _inside = runtime.enter();
            drop(value);
        }
    }
}

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
    /// renewing and reports [`GuardState::Expired`].
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

/// Runs `work` with `guard`, then releases it; the hold's end as an error when it came
/// first.
fn under<T>(guard: LockGuard, work: impl FnOnce(&LockGuard) -> T) -> Result<T, LockError> {
    let out = work(&guard);
    let ended = guard.ended();
    let released = guard.release();
    match ended {
        Some(error) => Err(error),
        None => {
            if let Err(e) = released {
                tracing::warn!(error = %e, "release after with_lock failed; the lease will expire by its TTL");
            }
            Ok(out)
        }
    }
}

/// A held lock for blocking code, renewed in the background on the backend's runtime
/// thread. [`LockGuard::release`] when done; a dropped guard releases in the
/// background (best effort: else the lease expires by its TTL).
pub struct LockGuard {
    inner: OnEngine<dlock_core::LockGuard>,
}

impl LockGuard {
    /// The fencing token.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.inner
            .get()
            .map_or(FencingToken::new(0), dlock_core::LockGuard::token)
    }

    /// The current lease, as last renewed.
    ///
    /// # Errors
    /// Never while the guard exists.
    pub fn lease(&self) -> Result<Lease, LockError> {
        self.inner.get().map(dlock_core::LockGuard::lease)
    }

    /// The guard's state (held, suspect, lost, expired).
    #[must_use]
    pub fn state(&self) -> GuardState {
        self.inner
            .get()
            .map_or(GuardState::Released, dlock_core::LockGuard::state)
    }

    /// `true` while the lease is certainly valid.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.inner.get().is_ok_and(dlock_core::LockGuard::is_held)
    }

    /// Blocks until the lease is lost (or the hold reaches its cap), or `limit`
    /// passed; whether it was lost. A watcher thread can use it to stop the work.
    #[must_use]
    pub fn wait_lost(&self, limit: Duration) -> bool {
        let Ok(guard) = self.inner.get() else {
            return false;
        };
        let lost = guard.lost();
        self.inner
            .engine
            .run(async move { Ok(tokio::time::timeout(limit, lost).await.is_ok()) })
            .unwrap_or(false)
    }

    /// Stops renewal and releases the lock; `Ok(false)` if it was no longer held.
    ///
    /// # Errors
    /// A backend error; the lease then expires by its TTL.
    pub fn release(mut self) -> Result<bool, LockError> {
        let guard = self.inner.take()?;
        self.inner.engine.run(async move { guard.release().await })
    }

    /// The error `with_lock` answers when the hold ended before the work did.
    fn ended(&self) -> Option<LockError> {
        let guard = self.inner.get().ok()?;
        let name: LockName = guard.lease().name().clone();
        match (guard.state(), guard.policy().max_hold) {
            (GuardState::Expired, Some(max_hold)) => Some(LockError::HoldExpired {
                name: name.to_string(),
                max_hold,
            }),
            (GuardState::Lost | GuardState::Expired, _) => Some(LockError::lease_lost(&name)),
            _ if !guard.is_held() => Some(LockError::lease_lost(&name)),
            _ => None,
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("token", &self.token())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}
