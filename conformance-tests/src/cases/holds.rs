//! Multi-lock and hold policies, built in core on every backend's lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{GuardState, LockError, LockName, Locker, random_u64};
use tokio::time::Instant;

use super::{LONG_TTL, take_and_release, unique};
use crate::{Harness, TestClient};

/// Six clients take overlapping sets of names, each listing its names in its own
/// order, round after round: every round completes (no deadlock), no name is ever
/// held twice, and after a burst of cancelled multi-lock acquisitions every name is
/// free again within the TTL.
pub async fn multi_lock_never_deadlocks(h: &impl Harness) {
    let base = unique("multi_lock_never_deadlocks");
    let names: Vec<String> = (0..4).map(|i| format!("{base}/{i}")).collect();
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..4).map(|_| AtomicBool::new(false)).collect());
    let mut tasks = Vec::new();
    for i in 0..6 {
        let c = h.client().await;
        let (names, busy) = (names.clone(), Arc::clone(&busy));
        tasks.push(tokio::spawn(async move {
            let locker = Locker::new(c.lock())
                .with_ttl(LONG_TTL)
                .with_wait(Duration::from_secs(90));
            let mut set = vec![i % 4, (i + 1) % 4, (i + 3) % 4];
            if i % 2 == 1 {
                set.reverse();
            }
            for _ in 0..4 {
                let all = locker
                    .lock_all(set.iter().map(|&n| names[n].as_str()))
                    .await
                    .expect("lock_all");
                assert_eq!(all.tokens().len(), 3);
                for &n in &set {
                    assert!(
                        !busy[n].swap(true, Ordering::SeqCst),
                        "{} held twice",
                        names[n]
                    );
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                for &n in &set {
                    busy[n].store(false, Ordering::SeqCst);
                }
                assert!(all.release().await.expect("release"));
            }
            drop(c);
        }));
    }
    let deadlocked = "overlapping multi-locks deadlocked";
    crate::steps::join_within(tasks, Duration::from_secs(120), deadlocked).await;

    // a multi-lock that cannot have every name gives back what it took at once, its
    // min_hold notwithstanding: nothing ran under it
    let blocker = h.client().await;
    let held = super::take(
        &*blocker,
        &LockName::new(&names[1]).expect("name"),
        LONG_TTL,
    )
    .await;
    let first = LockName::new(&names[0]).expect("name");
    let granted = granted_ttl(&blocker, &first, LONG_TTL).await;
    let delayed = Locker::new(h.client().await.lock())
        .with_ttl(LONG_TTL)
        .with_min_hold(granted);
    let none = delayed
        .try_lock_all([&names[0], &names[1]])
        .await
        .expect("try_lock_all");
    assert!(none.is_none(), "a held name cannot be had");
    let again = super::take(&*blocker, &first, LONG_TTL).await;
    assert!(blocker.release(&again).await.expect("release"));
    assert!(blocker.release(&held).await.expect("release"));

    // cancelled at random points: whatever they took is given back
    let ttl = h.short_ttl();
    let mut clients = Vec::new();
    for i in 0..6 {
        let c = h.client().await;
        let names = names.clone();
        let locker = Locker::new(c.lock()).with_ttl(ttl);
        let task = tokio::spawn(async move {
            let set = [&names[i % 4], &names[(i + 2) % 4], &names[(i + 1) % 4]];
            let _held = locker.lock_all(set).await;
            std::future::pending::<()>().await;
        });
        tokio::time::sleep(Duration::from_millis(random_u64() % 30)).await;
        task.abort();
        clients.push(c);
    }
    let checker = Locker::new(h.client().await.lock()).with_ttl(LONG_TTL);
    let end = Instant::now() + ttl + h.expiry_slack() + Duration::from_secs(3);
    loop {
        if let Some(all) = checker.try_lock_all(&names).await.expect("try_lock_all") {
            assert!(all.release().await.expect("release"));
            break;
        }
        assert!(
            Instant::now() < end,
            "cancelled multi-locks left a name held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(clients);
}

/// The TTL the backend grants when asked for `ttl` (a ZooKeeper server may clamp a
/// session timeout): the longest `min_hold` it can keep through a crash.
async fn granted_ttl(c: &TestClient, name: &LockName, ttl: Duration) -> Duration {
    let probe = super::take(&**c, name, ttl).await;
    assert!(c.release(&probe).await.expect("release"));
    probe.ttl()
}

/// The lock-delay and the crash bound of [`min_hold_blocks_after_release`].
const MIN_HOLD: Duration = Duration::from_secs(2);

/// Released at once under a `min_hold`, a name stays blocked until `min_hold` has
/// passed since it was taken, then frees itself.
pub async fn min_hold_blocks_after_release(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("min_hold_blocks_after_release");
    let ttl = (MIN_HOLD * 2).max(h.short_ttl());
    let min_hold = MIN_HOLD.min(granted_ttl(&a, &name, ttl).await);
    let locker = Locker::new(a.lock()).with_ttl(ttl).with_min_hold(min_hold);
    let guard = locker.lock(name.as_str()).await.expect("lock");
    let taken = Instant::now();
    // some backends keep the name by waiting out the remainder: release concurrently
    let release = tokio::spawn(guard.release());
    let end = taken + min_hold + ttl + h.expiry_slack() + Duration::from_secs(2);
    let next = loop {
        if let Some(l) = b.try_acquire(&name, LONG_TTL).await.expect("try_acquire") {
            break l;
        }
        assert!(
            Instant::now() < end,
            "the name never freed after its min_hold"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let freed = taken.elapsed();
    assert!(
        freed + Duration::from_millis(50) >= min_hold,
        "freed {freed:?} after it was taken, before its min_hold {min_hold:?}"
    );
    assert!(release.await.expect("task").expect("release"));
    assert!(b.release(&next).await.expect("release"));
}

/// A holder that crashes under a `min_hold` keeps the name blocked at least until
/// `min_hold` has passed (its TTL, never shorter than `min_hold`, runs on the server).
pub async fn min_hold_outlives_a_crash(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("min_hold_outlives_a_crash");
    let ttl = MIN_HOLD.max(h.short_ttl());
    let granted = granted_ttl(&a, &name, ttl).await;
    let min_hold = MIN_HOLD.min(granted);
    let locker = Locker::new(a.lock()).with_ttl(ttl).with_min_hold(min_hold);
    let guard = locker.lock(name.as_str()).await.expect("lock");
    let taken = Instant::now();
    a.crash();
    drop(guard);
    let end = taken + ttl + h.expiry_slack() + Duration::from_secs(3);
    let next = loop {
        if let Some(l) = b.try_acquire(&name, LONG_TTL).await.expect("try_acquire") {
            break l;
        }
        assert!(Instant::now() < end, "a crashed holder's name never freed");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let freed = taken.elapsed();
    assert!(
        freed + Duration::from_millis(50) >= min_hold,
        "freed {freed:?} after a crash, before its min_hold {min_hold:?}"
    );

    assert!(b.release(&next).await.expect("release"));

    // where the backend grants less than asked, a min_hold beyond the grant is
    // refused after the fact, and the name is not left held
    if granted < ttl {
        let too_long = Locker::new(b.lock())
            .with_ttl(ttl)
            .with_min_hold(granted + Duration::from_millis(1));
        let r = too_long.lock(name.as_str()).await;
        assert!(matches!(r, Err(LockError::InvalidArgument(_))), "{r:?}");
        let again = super::take(&*b, &name, ttl).await;
        assert!(b.release(&again).await.expect("release"));
    }
}

/// A hold capped by `max_hold` ends at the cap: `with_lock` cancels the work with
/// `HoldExpired` and frees the name; a bare guard turns `Expired` and fires `lost()`.
/// A `min_hold` the TTL cannot keep is refused up front.
pub async fn max_hold_ends_the_hold(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("max_hold_ends_the_hold");
    let cap = Duration::from_millis(400);
    let locker = Locker::new(a.lock()).with_ttl(LONG_TTL).with_max_hold(cap);
    let start = Instant::now();
    let r = locker
        .with_lock(name.as_str(), |_| {
            tokio::time::sleep(Duration::from_secs(60))
        })
        .await;
    assert!(matches!(r, Err(LockError::HoldExpired { .. })), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(10));
    // with_lock released the name at its cap
    take_and_release(&*b, &name, LONG_TTL).await;

    let guard = locker.lock(name.as_str()).await.expect("lock");
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost() fires at the cap");
    assert_eq!(guard.state(), GuardState::Expired);
    assert!(!guard.is_held());
    assert!(guard.release().await.expect("release"));

    let bad = Locker::new(a.lock())
        .with_ttl(Duration::from_secs(1))
        .with_min_hold(Duration::from_secs(2));
    let r = bad.lock(name.as_str()).await;
    assert!(matches!(r, Err(LockError::InvalidArgument(_))), "{r:?}");
}

/// `Locker::try_with_lock` runs its work only when the name is free, skips it (no call,
/// `None`) while another client holds it, and releases after the work.
pub async fn try_with_lock_skips_when_busy(h: &impl Harness) {
    let (a, b) = (h.client().await, h.client().await);
    let name = unique("try_with_lock_skips_when_busy");
    let held = super::take(&*a, &name, LONG_TTL).await;
    let locker = Locker::new(b.lock()).with_ttl(LONG_TTL);
    let ran = AtomicBool::new(false);
    let skipped = locker
        .try_with_lock(name.as_str(), |_| async {
            ran.store(true, Ordering::SeqCst)
        })
        .await
        .expect("try_with_lock");
    assert!(
        skipped.is_none() && !ran.load(Ordering::SeqCst),
        "ran while held"
    );
    assert!(a.release(&held).await.expect("release"));
    let token = locker
        .try_with_lock(name.as_str(), |token| async move { token })
        .await
        .expect("try_with_lock")
        .expect("free: the work runs");
    assert!(token > held.token());
    assert!(
        b.inspect(&name).await.expect("inspect").is_none(),
        "released after the work"
    );
}
