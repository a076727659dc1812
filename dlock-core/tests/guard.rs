//! The guard layer: watchdog renewal, suspect/lost states, drop releases.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{
    Acquisition, Capabilities, DistributedLock, GuardState, Lease, LockError, LockInfo, LockName,
    Locker, MemoryLock, async_trait,
};
use tokio::time::{Instant, sleep, timeout};

/// MemoryLock whose renewals can be made to fail on demand.
struct Faulty {
    inner: MemoryLock,
    refuse: AtomicBool,
    unreachable: AtomicBool,
    foreign: AtomicBool,
    renewals: AtomicUsize,
}

impl Faulty {
    fn new(inner: MemoryLock) -> Arc<Self> {
        Arc::new(Self {
            inner,
            refuse: AtomicBool::new(false),
            unreachable: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
            renewals: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl DistributedLock for Faulty {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        self.inner.acquire_with(request).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(LockError::lease_lost(lease.name()));
        }
        if self.foreign.load(Ordering::SeqCst) {
            return Err(LockError::InvalidArgument(
                "taken through another client".into(),
            ));
        }
        if self.unreachable.load(Ordering::SeqCst) {
            return Err(LockError::Unavailable {
                message: "test".into(),
                source: None,
            });
        }
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.inner.inspect(name).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

const TTL: Duration = Duration::from_millis(300);

/// A memory backend that fails on demand, and a locker on it with `ttl`.
fn faulty_locker(ttl: Duration) -> (Arc<Faulty>, Locker) {
    let backend = Faulty::new(MemoryLock::new());
    let locker = Locker::new(backend.clone()).with_ttl(ttl);
    (backend, locker)
}

#[tokio::test]
async fn guard_held_for_three_ttls_stays_held() {
    let table = MemoryLock::new();
    let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
    let guard = locker.lock("guard/held").await.unwrap();
    let token = guard.token();
    sleep(TTL * 3).await;
    assert!(guard.is_held());
    assert_eq!(guard.state(), GuardState::Held);
    let name = LockName::new("guard/held").unwrap();
    assert!(table.try_acquire(&name, TTL).await.unwrap().is_none());
    assert_eq!(guard.token(), token, "renewal keeps the token");
    assert!(guard.release().await.unwrap());
    assert!(table.try_acquire(&name, TTL).await.unwrap().is_some());
}

#[tokio::test]
async fn lost_fires_for_every_waiter_but_never_after_release() {
    let (backend, locker) = faulty_locker(TTL);
    let released = locker.lock("guard/released").await.unwrap();
    let never = released.lost();
    assert!(released.release().await.unwrap());
    assert!(timeout(TTL, never).await.is_err(), "release is not a loss");

    let guard = locker.lock("guard/two-waiters").await.unwrap();
    let (first, second) = (guard.lost(), guard.lost());
    backend.refuse.store(true, Ordering::SeqCst);
    let both = async { tokio::join!(first, second) };
    timeout(TTL, both).await.expect("both lost() futures fire");
    // and one made after the loss completes at once
    timeout(Duration::from_millis(10), guard.lost())
        .await
        .expect("lost() after the loss");
}

/// Waits up to `bound` for `guard`'s `lost()` (panicking with `late` otherwise), checks
/// that its state says so, and returns how long it took.
async fn lost_within(guard: &dlock_core::LockGuard, bound: Duration, late: &str) -> Duration {
    let t = Instant::now();
    timeout(bound, guard.lost()).await.expect(late);
    assert_eq!(guard.state(), GuardState::Lost);
    t.elapsed()
}

#[tokio::test]
async fn refused_renewal_fires_lost_within_one_interval() {
    let (backend, locker) = faulty_locker(TTL);
    let guard = locker.lock("guard/refused").await.unwrap();
    backend.refuse.store(true, Ordering::SeqCst);
    let took = lost_within(&guard, TTL / 3 + Duration::from_millis(150), "lost() fires").await;
    assert!(took <= TTL / 3 + Duration::from_millis(150));
    assert!(!guard.is_held());
}

/// A renewal refused for good (`InvalidArgument`: the lease belongs to another client
/// instance) is lost at once, not "suspect" until the lease runs out.
#[tokio::test]
async fn renewal_refused_for_good_is_lost_at_once() {
    let ttl = Duration::from_secs(3);
    let (backend, locker) = faulty_locker(ttl);
    let guard = locker.lock("guard/foreign").await.unwrap();
    backend.foreign.store(true, Ordering::SeqCst);
    let bound = ttl / 3 + Duration::from_millis(500);
    let took = lost_within(&guard, bound, "lost() fires at the first refused renewal").await;
    assert!(took < ttl * 2 / 3, "{took:?}");
}

#[tokio::test]
async fn with_lock_cancels_work_when_the_lease_is_lost() {
    let (backend, locker) = faulty_locker(TTL);
    let finished = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (f, s, b) = (
        Arc::clone(&finished),
        Arc::clone(&started),
        Arc::clone(&backend),
    );
    let r = locker
        .with_lock("guard/with_lock", move |_token| async move {
            s.store(true, Ordering::SeqCst);
            b.refuse.store(true, Ordering::SeqCst);
            sleep(Duration::from_secs(5)).await;
            f.store(true, Ordering::SeqCst);
        })
        .await;
    assert!(matches!(r, Err(LockError::LeaseLost { .. })), "{r:?}");
    assert!(started.load(Ordering::SeqCst));
    sleep(Duration::from_millis(50)).await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the closure must have been cancelled"
    );
}

#[tokio::test]
async fn with_lock_returns_the_work_and_releases() {
    let table = MemoryLock::new();
    let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
    let v = locker
        .with_lock("guard/ok", |t| async move { t.get() * 10 })
        .await
        .unwrap();
    assert_eq!(v, 10);
    let name = LockName::new("guard/ok").unwrap();
    assert!(
        table.inspect(&name).await.unwrap().is_none(),
        "released after the work"
    );
}

#[tokio::test]
async fn failing_renewals_go_suspect_then_lost_at_valid_until() {
    let (backend, locker) = faulty_locker(TTL);
    let guard = locker.lock("guard/suspect").await.unwrap();
    let valid_until = guard.lease().valid_until();
    backend.unreachable.store(true, Ordering::SeqCst);
    let mut rx_state = GuardState::Held;
    let end = Instant::now() + TTL * 2;
    while Instant::now() < end && rx_state != GuardState::Suspect {
        sleep(Duration::from_millis(5)).await;
        rx_state = guard.state();
    }
    assert_eq!(rx_state, GuardState::Suspect);
    assert!(guard.is_held(), "suspect but still within valid_until");
    guard.lost().await;
    assert!(
        Instant::now() >= valid_until,
        "lost only once valid_until passed"
    );
    assert!(Instant::now() < valid_until + Duration::from_millis(100));
    assert!(
        backend.renewals.load(Ordering::SeqCst) >= 2,
        "transient failures are retried"
    );
}

#[tokio::test]
async fn transient_renewal_failure_recovers_to_held() {
    let (backend, locker) = faulty_locker(TTL);
    let guard = locker.lock("guard/recover").await.unwrap();
    backend.unreachable.store(true, Ordering::SeqCst);
    sleep(TTL / 3 + Duration::from_millis(40)).await;
    assert_eq!(guard.state(), GuardState::Suspect);
    backend.unreachable.store(false, Ordering::SeqCst);
    sleep(Duration::from_millis(60)).await;
    assert_eq!(guard.state(), GuardState::Held);
    sleep(TTL).await;
    assert!(guard.is_held());
}

#[tokio::test]
async fn dropped_guard_releases_without_waiting_for_ttl() {
    let table = MemoryLock::new();
    let locker = Locker::new(Arc::new(table.clone())).with_ttl(Duration::from_secs(30));
    let guard = locker.lock("guard/drop").await.unwrap();
    drop(guard);
    let name = LockName::new("guard/drop").unwrap();
    let lease = table
        .acquire(&name, TTL, Duration::from_secs(1))
        .await
        .expect("freed by drop");
    assert!(table.release(&lease).await.unwrap());
}

#[tokio::test]
async fn try_lock_and_bad_names() {
    let locker = Locker::new(Arc::new(MemoryLock::new()));
    let g = locker.try_lock("guard/try").await.unwrap().expect("free");
    assert!(locker.try_lock("guard/try").await.unwrap().is_none());
    assert!(matches!(
        locker.lock("").await,
        Err(LockError::InvalidName { .. })
    ));
    assert!(matches!(
        locker.try_lock("a\u{0}b").await,
        Err(LockError::InvalidName { .. })
    ));
    let zero = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::ZERO);
    assert!(matches!(
        zero.lock("x").await,
        Err(LockError::InvalidArgument(_))
    ));
    assert!(g.release().await.unwrap());
}

/// A name taken by `lock_all` and broken while it waits for the next is not handed out
/// as held: `lock_all` answers `LeaseLost` naming it, and gives every name back.
#[tokio::test]
async fn lock_all_never_hands_out_a_part_lost_while_it_waited() {
    let mem = Arc::new(MemoryLock::new());
    let locker = Locker::new(mem.clone())
        .with_ttl(Duration::from_secs(30))
        .with_wait(Duration::from_secs(10));
    let (a, b) = (
        LockName::new("all/a").unwrap(),
        LockName::new("all/b").unwrap(),
    );
    let other = mem
        .try_acquire(&b, Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let waiting = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock_all(["all/a", "all/b"]).await })
    };
    // `a` is taken, `b` awaited: an operator breaks `a`, then `b` is let go
    let end = Instant::now() + Duration::from_secs(5);
    while mem.inspect(&a).await.unwrap().is_none() {
        assert!(Instant::now() < end, "lock_all never took a");
        sleep(Duration::from_millis(5)).await;
    }
    mem.break_holder(&a).await.unwrap().expect("a was held");
    assert!(mem.release(&other).await.unwrap());
    match waiting.await.unwrap() {
        Err(LockError::LeaseLost { name }) => assert_eq!(name, "all/a"),
        Ok(held) => panic!(
            "handed out with a lost part: {:?}",
            held.guards().iter().map(|g| g.state()).collect::<Vec<_>>()
        ),
        Err(e) => panic!("{e}"),
    }
    assert!(mem.inspect(&b).await.unwrap().is_none(), "b given back");
}
