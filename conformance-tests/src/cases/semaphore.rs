//! Counting semaphores ([`dlock_core::DistributedSemaphore`]): never more than N.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{Access, LockError, LockName};
use tokio::time::{Instant, sleep, timeout};

use super::workload::on_every_client;
use super::{LONG_TTL, assert_fresh, clients, expiry_bound, shared_case};
use crate::{Harness, TestClient};

async fn permit(c: &TestClient, name: &LockName, n: u32, ttl: Duration) -> dlock_core::Lease {
    let lease = c
        .try_acquire_permit(name, n, ttl)
        .await
        .expect("try_acquire_permit must not fail")
        .unwrap_or_else(|| panic!("a permit of {name} should be free"));
    assert_fresh(&lease);
    lease
}

/// One of `n` permits for `c`, waited for as long as a lease of `ttl` may take to
/// free after its holder crashed; it panics with `late` otherwise.
async fn permit_after_expiry(
    h: &impl Harness,
    c: &TestClient,
    name: &LockName,
    n: u32,
    ttl: Duration,
    late: &str,
) -> dlock_core::Lease {
    let wait = expiry_bound(h, ttl);
    c.acquire_permit(name, n, LONG_TTL, wait).await.expect(late)
}

/// N permits are granted, the N+1st is refused until one is released; tokens increase
/// in grant order; `permit_holders` lists exactly the holders.
pub async fn semaphore_admits_n(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "semaphore_admits_n").await else {
        return;
    };
    let b = h.client().await;
    let first = permit(&a, &name, 3, LONG_TTL).await;
    let second = permit(&b, &name, 3, LONG_TTL).await;
    let third = permit(&a, &name, 3, LONG_TTL).await;
    assert!(first.token() < second.token() && second.token() < third.token());
    let r = b.try_acquire_permit(&name, 3, LONG_TTL).await.expect("try");
    assert!(r.is_none(), "a fourth permit of three was granted: {r:?}");
    // oldest grant first
    let holders = b.permit_holders(&name).await.expect("holders");
    let seen: Vec<_> = holders.iter().map(|h| (&h.owner, h.token)).collect();
    let granted: Vec<_> = [&first, &second, &third]
        .iter()
        .map(|l| (l.owner(), l.token()))
        .collect();
    assert_eq!(seen, granted);
    assert!(
        holders.iter().all(|h| h.access == Access::Permit(3)),
        "{holders:?}"
    );
    assert!(b.release(&second).await.expect("release"));
    let fourth = permit(&b, &name, 3, LONG_TTL).await;
    assert!(fourth.token() > third.token());
    for (c, l) in [(&a, &first), (&a, &third), (&b, &fourth)] {
        assert!(c.release(l).await.expect("release"));
    }
    assert!(b.permit_holders(&name).await.expect("holders").is_empty());
    // a semaphore, a read-write lock and a mutex of one name are different things
    let m = a
        .try_acquire(&name, LONG_TTL)
        .await
        .expect("try")
        .expect("mutex free");
    let p = permit(&b, &name, 1, LONG_TTL).await;
    assert!(a.release(&m).await.expect("release") && b.release(&p).await.expect("release"));
}

/// The count is part of a name's contract while anyone holds or waits for it: another
/// count is refused with `PermitsMismatch` (never admitted under its own count); an idle
/// name takes the count of its next caller.
pub async fn semaphore_count_is_part_of_the_contract(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "semaphore_count_is_part_of_the_contract").await else {
        return;
    };
    let b = h.client().await;
    let held = permit(&a, &name, 2, LONG_TTL).await;
    for r in [
        b.try_acquire_permit(&name, 3, LONG_TTL).await,
        b.acquire_permit(&name, 5, LONG_TTL, Duration::from_millis(300))
            .await
            .map(Some),
    ] {
        assert!(
            matches!(r, Err(LockError::PermitsMismatch { in_use: 2, .. })),
            "{r:?}"
        );
    }
    for bad in [0, dlock_core::MAX_PERMITS + 1] {
        let r = b.try_acquire_permit(&name, bad, LONG_TTL).await;
        assert!(matches!(r, Err(LockError::InvalidArgument(_))), "{r:?}");
    }
    assert!(a.release(&held).await.expect("release"));
    let idle = permit(&b, &name, 3, LONG_TTL).await;
    assert!(b.release(&idle).await.expect("release"));
}

/// A caller of another count with a wait waits for the name to go idle instead of
/// failing at once, then holds under its own count: how a count changes in a rolling
/// deploy, and why an entry left by a killed caller of another count delays correct
/// callers (until its TTL) rather than failing them.
pub async fn another_count_waits_for_an_idle_name(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "another_count_waits_for_an_idle_name").await else {
        return;
    };
    let b = h.client().await;
    let held = permit(&a, &name, 2, LONG_TTL).await;
    let waiter = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move {
            b.acquire_permit(&name, 3, LONG_TTL, Duration::from_secs(20))
                .await
        })
    };
    sleep(Duration::from_millis(500)).await;
    assert!(
        !waiter.is_finished(),
        "a caller of another count with a wait must wait, not fail: {:?}",
        waiter.await
    );
    assert!(a.release(&held).await.expect("release"));
    let lease = timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the waiter gets in once the name is idle")
        .expect("task")
        .expect("a permit under the new count");
    assert_fresh(&lease);
    // the name now carries the new count: the old one is refused while it is held
    let r = a.try_acquire_permit(&name, 2, LONG_TTL).await;
    assert!(
        matches!(r, Err(LockError::PermitsMismatch { in_use: 3, .. })),
        "{r:?}"
    );
    assert!(b.release(&lease).await.expect("release"));
}

/// Many clients take and give back permits of one semaphore (N = 3); a gauge checked at
/// every entry never sees more than N holders, and it does see them share.
pub async fn semaphore_never_more_than_n(h: &impl Harness) {
    const N: u32 = 3;
    let Some((_probe, name)) = shared_case(h, "semaphore_never_more_than_n").await else {
        return;
    };
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let gauges = (Arc::clone(&inside), Arc::clone(&most));
    on_every_client(h, move |c| {
        let (name, (inside, most)) = (name.clone(), gauges.clone());
        async move {
            let lease = c
                .acquire_permit(&name, N, LONG_TTL, Duration::from_secs(120))
                .await
                .expect("acquire_permit in workload");
            assert_fresh(&lease);
            let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now_inside, Ordering::SeqCst);
            assert!(
                now_inside <= N as usize,
                "{now_inside} holders of a {N}-permit semaphore"
            );
            sleep(Duration::from_millis(2)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            assert!(c.release(&lease).await.expect("release in workload"));
        }
    })
    .await;
    let most = most.load(Ordering::SeqCst);
    assert!(
        most >= 2,
        "permits never overlapped (at most {most} at once)"
    );
}

/// A crashed holder's permit comes free within its TTL, and only that one: the other
/// holder keeps its permit and can renew it.
pub async fn semaphore_crashed_holder_frees_its_permit(h: &impl Harness) {
    let Some((b, name)) = shared_case(h, "semaphore_crashed_holder_frees_its_permit").await else {
        return;
    };
    let [a, c] = clients(h).await;
    let ttl = h.short_ttl();
    let gone = permit(&a, &name, 2, ttl).await;
    let kept = permit(&b, &name, 2, LONG_TTL).await;
    assert!(
        c.try_acquire_permit(&name, 2, ttl)
            .await
            .expect("try")
            .is_none()
    );
    let crashed_at = Instant::now();
    a.crash();
    let freed = "a crashed holder's permit must free within its TTL";
    let next = permit_after_expiry(h, &c, &name, 2, ttl, freed).await;
    assert!(crashed_at.elapsed() <= expiry_bound(h, ttl) + Duration::from_millis(500));
    assert!(next.token() > gone.token());
    let kept = b
        .renew(&kept)
        .await
        .expect("the other holder keeps its permit");
    assert!(
        c.try_acquire_permit(&name, 2, ttl)
            .await
            .expect("try")
            .is_none()
    );
    assert!(b.release(&kept).await.expect("release"));
    assert!(c.release(&next).await.expect("release"));
}

/// An expired permit can neither renew nor release the permit that replaced it.
pub async fn semaphore_stale_permit_cannot_touch_another(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "semaphore_stale_permit_cannot_touch_another").await
    else {
        return;
    };
    let b = h.client().await;
    let ttl = h.short_ttl();
    let stale = permit(&a, &name, 1, ttl).await;
    if a.capabilities().lease_scope == dlock_core::LeaseScope::PerSession {
        a.crash();
    }
    let fresh = permit_after_expiry(h, &b, &name, 1, ttl, "takeover after expiry").await;
    assert!(fresh.token() > stale.token());
    for c in [&a, &b] {
        if let Ok(r) = c.renew(&stale).await {
            panic!("a stale permit was renewed: {r:?}");
        }
        assert!(!c.release(&stale).await.unwrap_or(false));
    }
    let holders = b.permit_holders(&name).await.expect("holders");
    assert_eq!(holders.len(), 1);
    assert_eq!(&holders[0].owner, fresh.owner());
    assert!(b.release(&fresh).await.expect("release"));
}

/// Waiters dropped mid-wait leave nothing behind: once the holder releases, a new
/// caller gets a permit at once.
pub async fn semaphore_cancelled_waiters_leave_no_ghosts(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "semaphore_cancelled_waiters_leave_no_ghosts").await
    else {
        return;
    };
    let held = permit(&a, &name, 1, LONG_TTL).await;
    for _ in 0..3 {
        let w = h.client().await;
        let r = timeout(
            Duration::from_millis(400),
            w.acquire_permit(&name, 1, LONG_TTL, Duration::from_secs(30)),
        )
        .await;
        assert!(r.is_err(), "a waiter got a held permit: {r:?}");
    }
    assert!(a.release(&held).await.expect("release"));
    let b = h.client().await;
    let next = b
        .acquire_permit(&name, 1, LONG_TTL, Duration::from_secs(3))
        .await
        .expect("no ghost waiter may hold the permit");
    assert!(b.release(&next).await.expect("release"));
}

/// A release hands its permit to a waiter promptly, and only one waiter gets it.
pub async fn semaphore_release_admits_one_waiter(h: &impl Harness) {
    let Some((a, name)) = shared_case(h, "semaphore_release_admits_one_waiter").await else {
        return;
    };
    let held = [
        permit(&a, &name, 2, LONG_TTL).await,
        permit(&a, &name, 2, LONG_TTL).await,
    ];
    let got = Arc::new(AtomicUsize::new(0));
    let mut waiters = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let c = h.client().await;
        let (name, got) = (name.clone(), Arc::clone(&got));
        waiters.spawn(async move {
            let lease = c
                .acquire_permit(&name, 2, LONG_TTL, Duration::from_secs(20))
                .await
                .expect("waiter");
            got.fetch_add(1, Ordering::SeqCst);
            // hold it until the case ends
            sleep(Duration::from_secs(30)).await;
            drop(lease);
        });
    }
    sleep(Duration::from_millis(800)).await;
    assert_eq!(got.load(Ordering::SeqCst), 0, "waiters got held permits");
    assert!(a.release(&held[0]).await.expect("release"));
    let end = Instant::now() + Duration::from_secs(5);
    while got.load(Ordering::SeqCst) == 0 && Instant::now() < end {
        sleep(Duration::from_millis(10)).await;
    }
    sleep(Duration::from_millis(500)).await;
    assert_eq!(got.load(Ordering::SeqCst), 1, "one release, one permit");
    waiters.abort_all();
    assert!(a.release(&held[1]).await.expect("release"));
}
