//! Guards renew from one timetable per runtime: a held lock is an entry in it, not a
//! task of its own, and a runtime started after another one shut down renews its own
//! guards; the renewals in flight at once are bounded, and a backend whose renewals
//! hang holds up no other backend's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{
    Acquisition, Capabilities, DistributedLock, GuardState, Lease, LockError, LockInfo, LockName,
    Locker, MemoryLock, async_trait,
};
use tokio::runtime::{Builder, Handle};
use tokio::time::sleep;

const TTL: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_guards_are_not_a_task_each() {
    let table = MemoryLock::new();
    let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
    // the first guard starts the runtime's renewal task
    let first = locker.lock("timetable/first").await.unwrap();
    let tasks_before = Handle::current().metrics().num_alive_tasks();
    let mut guards = Vec::new();
    for i in 0..2_000 {
        guards.push(locker.lock(format!("timetable/{i}")).await.unwrap());
    }
    let tasks_held = Handle::current().metrics().num_alive_tasks();
    assert!(
        tasks_held < tasks_before + 10,
        "2 000 held guards took {} tasks",
        tasks_held - tasks_before
    );
    // and they are renewed: held past three TTLs, the names still taken
    sleep(TTL * 3).await;
    assert!(guards.iter().all(|g| g.is_held()), "every guard renewed");
    let name = LockName::new("timetable/1999").unwrap();
    assert!(table.try_acquire(&name, TTL).await.unwrap().is_none());
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    assert!(first.release().await.unwrap());
}

/// Holds one guard for three TTLs on a fresh current-thread runtime, and says whether
/// it stayed held.
fn hold_on_a_new_runtime(table: &MemoryLock, name: &str) -> bool {
    let runtime = Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
        let guard = locker.lock(name).await.unwrap();
        sleep(TTL * 3).await;
        let held = guard.is_held();
        assert!(guard.release().await.unwrap());
        held
    })
}

#[test]
fn each_runtime_renews_its_own_guards_after_another_shut_down() {
    let table = MemoryLock::new();
    // runtime ids may be reused once a runtime is gone: the second must not find the
    // first one's timetable, whose task went with it
    for round in 0..3 {
        assert!(
            hold_on_a_new_runtime(&table, &format!("timetable/runtime-{round}")),
            "round {round}: the guard was not renewed"
        );
    }
}

#[test]
fn two_runtimes_at_once_each_renew_their_guards() {
    let table = MemoryLock::new();
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let table = table.clone();
            std::thread::spawn(move || {
                hold_on_a_new_runtime(&table, &format!("timetable/both-{i}"))
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap(), "a guard was not renewed");
    }
}

/// A `MemoryLock` whose renewals take `delay` (or hang while `hang` is set), counting
/// how many are in flight at once. It declares batched renewals, so its guards renew
/// together on the grid, as a Redis or etcd client's do.
struct SlowRenewals {
    inner: MemoryLock,
    delay: Duration,
    hang: AtomicBool,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    renewed: AtomicUsize,
}

impl SlowRenewals {
    fn new(delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryLock::new(),
            delay,
            hang: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            renewed: AtomicUsize::new(0),
        })
    }
}

/// Counts a renewal out of flight when its future ends, answered or dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl DistributedLock for SlowRenewals {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        self.inner.acquire_with(request).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let _counted = InFlight(&self.in_flight);
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        sleep(self.delay).await;
        let renewed = self.inner.renew(lease).await?;
        self.renewed.fetch_add(1, Ordering::SeqCst);
        Ok(renewed)
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner.inspect(name).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().with_batched_renewals(true)
    }
}

/// The timetable's limit on renewals in flight at once (its `WORKERS`).
const WORKERS: usize = 4096;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_in_flight_at_once_are_bounded() {
    // 10 000 guards due on one or two grid instants, each renewal 50 ms in flight:
    // without a bound all of them are in flight at once (each future ≈ 0.8 KiB, a peak
    // the allocator keeps); with it at most WORKERS, and every guard still renews
    let ttl = Duration::from_secs(3);
    let backend = SlowRenewals::new(Duration::from_millis(50));
    let locker = Locker::new(backend.clone()).with_ttl(ttl);
    let mut guards = Vec::new();
    for i in 0..10_000 {
        guards.push(locker.lock(format!("timetable/bounded-{i}")).await.unwrap());
    }
    let first_leases: Vec<_> = guards.iter().map(|g| g.lease().valid_until()).collect();
    // every guard's first renewal comes at ≤ 5/12 of the TTL
    sleep(ttl * 5 / 6).await;
    let most = backend.most_in_flight.load(Ordering::SeqCst);
    assert!(most <= WORKERS, "{most} renewals in flight at once");
    for (i, (g, first)) in guards.iter().zip(first_leases).enumerate() {
        assert!(g.is_held(), "bounded-{i} not held");
        assert!(g.lease().valid_until() > first, "bounded-{i} never renewed");
    }
    for g in guards {
        assert!(g.release().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_whose_renewals_hang_holds_up_no_other_backends_renewals() {
    // more guards than workers on a backend whose renewals never answer: every worker
    // ends up waiting on it (each attempt until its time limit, then a retry, until
    // the lease runs out), and the other backend's guards, due behind them in the
    // ready queue, must still renew in time
    let stuck = SlowRenewals::new(Duration::ZERO);
    let stuck_locker = Locker::new(stuck.clone()).with_ttl(Duration::from_secs(3));
    let mut stuck_guards = Vec::new();
    for i in 0..WORKERS + 1_000 {
        stuck_guards.push(
            stuck_locker
                .lock(format!("timetable/stuck-{i}"))
                .await
                .unwrap(),
        );
    }
    stuck.hang.store(true, Ordering::SeqCst);
    let healthy = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::from_millis(600));
    let mut guards = Vec::new();
    for i in 0..10 {
        guards.push(
            healthy
                .lock(format!("timetable/healthy-{i}"))
                .await
                .unwrap(),
        );
    }
    // a guard whose hold is capped while the workers are stuck: its cap must end it at
    // once, not after the sixth of its TTL (1 s) a renewal may wait for a worker
    let capped_locker = Locker::new(Arc::new(MemoryLock::new()))
        .with_ttl(Duration::from_secs(6))
        .with_max_hold(Duration::from_millis(1_500));
    let capped = capped_locker.lock("timetable/capped").await.unwrap();
    sleep(Duration::from_millis(1_500 + 400)).await;
    assert_eq!(
        capped.state(),
        GuardState::Expired,
        "a capped guard waited behind the stuck backend's renewals"
    );
    sleep(Duration::from_millis(600)).await;
    let most = stuck.most_in_flight.load(Ordering::SeqCst);
    assert!(
        most >= WORKERS,
        "the stuck backend's renewals did not fill the workers: at most {most} in flight"
    );
    for (i, g) in guards.iter().enumerate() {
        assert!(g.is_held(), "healthy-{i} lost behind the stuck backend");
    }
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    drop(stuck_guards);
}
