//! What a backend provides so the suite can test it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Access, Acquisition, Capabilities, Coordination, DistributedLock, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, SharedLock,
};

/// Hands out clients of one backend, each as if it ran in another process.
///
/// Implement it in an adapter's `tests/conformance.rs` and expand the suite with
/// [`crate::conformance_suite!`].
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// A new, independent client (its own connections or session).
    async fn client(&self) -> TestClient;

    /// A client whose network path to the server can be cut and healed (normally
    /// through a [`crate::FaultProxy`]). Its operations must give up with
    /// [`LockError::Unavailable`] within a few seconds while the path is cut.
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>);

    /// The backend's pace: its shortest honoured TTL, how late it notices an expired
    /// lease, and how hard the counter workload runs. Override this one method; the
    /// three below read it.
    fn timings(&self) -> Timings {
        Timings::default()
    }

    /// A short TTL the backend honours exactly enough for the expiry cases
    /// (the minimum lease for etcd, a short session for ZooKeeper).
    fn short_ttl(&self) -> Duration {
        self.timings().short_ttl
    }

    /// How much later than its TTL the server may notice an expired lease (etcd
    /// checks leases every 500 ms; ZooKeeper expires sessions on tick boundaries).
    fn expiry_slack(&self) -> Duration {
        self.timings().expiry_slack
    }

    /// Clients and iterations for the counter workload.
    fn workload(&self) -> (usize, usize) {
        let t = self.timings();
        (t.clients, t.iterations)
    }
}

/// How fast a backend under test is, for the cases that wait on expiry and the
/// workloads that run many clients ([`Harness::timings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timings {
    /// A short TTL the backend honours exactly enough for the expiry cases.
    pub short_ttl: Duration,
    /// How much later than its TTL the server may notice an expired lease.
    pub expiry_slack: Duration,
    /// Clients of the counter workload.
    pub clients: usize,
    /// Iterations of each client of the counter workload.
    pub iterations: usize,
}

impl Timings {
    /// A TTL of `short_ttl_ms`, noticed at most `slack_ms` late, and a workload of
    /// eight clients running `iterations` cycles each.
    #[must_use]
    pub const fn millis(short_ttl_ms: u64, slack_ms: u64, iterations: usize) -> Self {
        Self {
            short_ttl: Duration::from_millis(short_ttl_ms),
            expiry_slack: Duration::from_millis(slack_ms),
            clients: 8,
            iterations,
        }
    }

    /// The same, with a short TTL that is not a whole number of milliseconds away
    /// (a backend's own constant).
    #[must_use]
    pub const fn with_short_ttl(self, short_ttl: Duration) -> Self {
        Self { short_ttl, ..self }
    }
}

impl Default for Timings {
    /// 500 ms TTL, 500 ms slack, 8 clients × 50 iterations.
    fn default() -> Self {
        Self::millis(500, 500, 50)
    }
}

/// A network path between one client and the server that a case can cut.
#[async_trait]
pub trait Link: Send + Sync {
    /// Stops all traffic (existing connections hang, new ones are not answered).
    async fn cut(&self);
    /// Lets traffic through again.
    async fn heal(&self);
    /// How many requests the client has sent over this path so far, keepalives not
    /// counted (`None` where the path cannot count them, as an in-process switch): how
    /// the suite sees which waiters a release woke.
    fn requests(&self) -> Option<u64>;
}

/// One client of the backend under test, which the suite can crash.
#[derive(Clone)]
pub struct TestClient {
    inner: Arc<Crashable>,
}

type CrashHook = Box<dyn Fn() + Send + Sync>;

impl TestClient {
    /// A client whose crash drops `lock` (closing its connections without releasing
    /// anything) and fails every later call with [`LockError::Unavailable`]. Every
    /// primitive of the backend goes through it (mutex, semaphore, read-write lock).
    #[must_use]
    pub fn new(lock: Arc<dyn Coordination>) -> Self {
        Self::with_crash_hook(lock, Box::new(|| {}))
    }

    /// A client of an adapter that implements only [`DistributedLock`] (not through
    /// `dlock_core::backend::Backend`, which brings the other primitives): its
    /// semaphore and read-write calls answer `Unsupported`, which the shared cases
    /// check, and its capabilities say `shared: false`.
    #[must_use]
    pub fn mutex_only(lock: Arc<dyn DistributedLock>) -> Self {
        Self::new(Arc::new(crate::mutex_only::MutexOnly(lock)))
    }

    /// Like [`TestClient::new`], and runs `hook` on crash (for example to blackhole a
    /// proxy so a ZooKeeper session dies the way a crashed process's does, instead of
    /// being closed politely).
    #[must_use]
    pub fn with_crash_hook(lock: Arc<dyn Coordination>, hook: CrashHook) -> Self {
        Self {
            inner: Arc::new(Crashable {
                lock: Mutex::new(Some(lock)),
                capabilities: Mutex::new(None),
                view: Mutex::new(Access::Exclusive),
                hook,
            }),
        }
    }

    /// A client of `lock` whose network path is `link` (what
    /// [`Harness::partitionable_client`] returns: a proxy the lock connects through).
    #[must_use]
    pub fn behind(link: impl Link + 'static, lock: Arc<dyn Coordination>) -> (Self, Box<dyn Link>) {
        (Self::new(lock), Box::new(link))
    }

    /// The client as the trait object services use.
    #[must_use]
    pub fn lock(&self) -> Arc<dyn DistributedLock> {
        Arc::clone(&self.inner) as Arc<dyn DistributedLock>
    }

    /// The client with all its primitives.
    #[must_use]
    pub fn coordination(&self) -> Arc<dyn Coordination> {
        Arc::clone(&self.inner) as Arc<dyn Coordination>
    }

    /// The same client whose mutex calls (`try_acquire`, `acquire`, `inspect`) take
    /// `access` instead: the write side of read-write locks or a one-permit semaphore,
    /// which must behave as a mutex (see [`crate::Viewed`]).
    #[must_use]
    pub fn viewed(self, access: Access) -> Self {
        *self
            .inner
            .view
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = access;
        self
    }

    /// Simulates a crash of the process: nothing is released, connections drop.
    pub fn crash(&self) {
        self.inner.crash();
    }
}

impl std::ops::Deref for TestClient {
    type Target = dyn Coordination;
    fn deref(&self) -> &Self::Target {
        &*self.inner
    }
}

struct Crashable {
    lock: Mutex<Option<Arc<dyn Coordination>>>,
    capabilities: Mutex<Option<Capabilities>>,
    view: Mutex<Access>,
    hook: CrashHook,
}

impl Crashable {
    fn live(&self) -> Result<Arc<dyn Coordination>, LockError> {
        self.lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(LockError::Unavailable {
                message: "client crashed (test harness)".into(),
                source: None,
            })
    }

    /// The live client's mutex, or the shared side this client views as one.
    fn viewed_lock(&self) -> Result<Arc<dyn DistributedLock>, LockError> {
        let live = self.live()?;
        let view = *self.view.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match view {
            Access::Permit(n) => Arc::new(SharedLock::permits(live, n)?),
            Access::Read => Arc::new(SharedLock::reads(live)),
            Access::Write => Arc::new(SharedLock::writes(live)),
            _ => live,
        })
    }

    fn crash(&self) {
        let inner = self
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(inner) = inner {
            *self
                .capabilities
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(inner.capabilities());
        }
        (self.hook)();
    }
}

#[async_trait]
impl DistributedLock for Crashable {
    // a mutex acquisition through the view this client has (a permit, a side of a
    // read-write lock); an explicit permit or read/write request as it is
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        match request.access() {
            Access::Exclusive => self.viewed_lock()?.acquire_with(request).await,
            _ => self.live()?.acquire_with(request).await,
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.live()?.renew(lease).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.live()?.release(lease).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.viewed_lock()?.inspect(name).await
    }
    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.live()?.holders(name, of).await
    }
    async fn hand_over(&self, lease: &Lease) -> Result<dlock_core::Ticket, LockError> {
        self.viewed_lock()?.hand_over(lease).await
    }
    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        self.live()?.proclaim(lease, value).await
    }
    async fn resume(&self, ticket: &dlock_core::Ticket) -> Result<Lease, LockError> {
        self.viewed_lock()?.resume(ticket).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<dlock_core::Held>, LockError> {
        self.viewed_lock()?.list(prefix).await
    }
    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        self.viewed_lock()?.diagnose().await
    }
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.live()?.break_holder(name).await
    }
    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.live()?.revoke_holder(name).await
    }
    // through the view, as a service's Locker over a SharedLock would
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.viewed_lock()?.release_after(lease, linger).await
    }
    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        self.viewed_lock()?.holder_changed(watch).await
    }

    fn capabilities(&self) -> Capabilities {
        match self.live() {
            Ok(l) => l.capabilities(),
            Err(_) => self
                .capabilities
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or(Capabilities::per_lease()),
        }
    }

    fn backend_name(&self) -> &'static str {
        self.live().map_or("crashed", |l| l.backend_name())
    }
}

/// Reads a test server address from the environment.
///
/// # Panics
/// When the variable is missing: a backend's tests never skip silently. Start the
/// servers with `scripts/services up` (or run `scripts/test`).
/// Panics too in the quick tier (`DLOCK_TIER=quick`, set by `scripts/test --quick`),
/// whatever the environment holds: a test that reads a server's address belongs behind
/// its crate's `server-tests` feature, which the quick tier leaves off.
#[must_use]
pub fn required_env(var: &str) -> String {
    assert!(
        std::env::var("DLOCK_TIER").as_deref() != Ok("quick"),
        "{var} read in the quick tier: this test needs a real server, so it belongs behind \
         its crate's `server-tests` feature (`#[cfg(feature = \"server-tests\")]`), which \
         `scripts/test --quick` leaves off"
    );
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v,
        _ => panic!(
            "{var} is not set: this test needs a real server. Run `scripts/test`, or \
             `eval \"$(scripts/services up)\"` first."
        ),
    }
}
