//! Blocking acquire: wake-up, timeout, cancel safety, fairness.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{LockError, random_u64};
use tokio::sync::Mutex;
use tokio::time::{Instant, sleep, timeout};

use super::{LONG_TTL, assert_fresh, clients_and_name, expiry_bound, take, take_within, unique};
use crate::Harness;

/// A waiter blocked in `acquire` gets the lock soon after the holder releases it.
pub async fn acquire_waits_for_release(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "acquire_waits_for_release").await;
    let held = take(&*a, &name, LONG_TTL).await;
    let waiter = {
        let (b, name) = (b.lock(), name.clone());
        tokio::spawn(async move {
            let lease = b.acquire(&name, LONG_TTL, Duration::from_secs(20)).await;
            (lease, Instant::now())
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter must wait while the lock is held"
    );
    assert!(a.release(&held).await.expect("release"));
    let released = Instant::now();
    let (lease, got_at) = timeout(Duration::from_secs(10), waiter)
        .await
        .expect("waiter finishes")
        .expect("join");
    let lease = lease.expect("waiter acquires after release");
    assert_fresh(&lease);
    let latency = got_at.saturating_duration_since(released);
    // a generous behavioural bound; the real figure belongs in `dlock bench`
    assert!(
        latency < Duration::from_secs(2),
        "hand-off took {latency:?}"
    );
    assert!(lease.token() > held.token());
    assert!(b.release(&lease).await.expect("release"));
}

/// `acquire` gives up with `Timeout` after `wait`, not much later, and takes nothing.
pub async fn acquire_times_out(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "acquire_times_out").await;
    let held = take(&*a, &name, LONG_TTL).await;
    let wait = Duration::from_millis(700);
    let t = Instant::now();
    let r = b.acquire(&name, LONG_TTL, wait).await;
    let took = t.elapsed();
    assert!(matches!(r, Err(LockError::Timeout { .. })), "{r:?}");
    assert!(took >= wait, "gave up early: {took:?}");
    assert!(
        took < wait + Duration::from_secs(3),
        "gave up late: {took:?}"
    );
    let info = b.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(&info.owner, held.owner());
    assert!(a.release(&held).await.expect("release"));
    // nothing of the timed-out waiter remains in the way
    let next = take_within(&*a, &name, LONG_TTL, Duration::from_secs(2))
        .await
        .expect("free");
    assert!(a.release(&next).await.expect("release"));
}

/// `wait == 0` is a single attempt: it fails at once when held and succeeds when free.
pub async fn acquire_with_zero_wait(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "acquire_with_zero_wait").await;
    let held = b
        .acquire(&name, LONG_TTL, Duration::ZERO)
        .await
        .expect("free lock, zero wait");
    assert_fresh(&held);
    let t = Instant::now();
    let r = a.acquire(&name, LONG_TTL, Duration::ZERO).await;
    assert!(matches!(r, Err(LockError::Timeout { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(b.release(&held).await.expect("release"));
}

/// A waiter blocked in `acquire` gets the lock when a crashed holder's lease expires.
pub async fn acquire_wakes_when_holder_crashes(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "acquire_wakes_when_holder_crashes").await;
    let ttl = h.short_ttl();
    let held = take(&*a, &name, ttl).await;
    a.crash();
    let t = Instant::now();
    let bound = expiry_bound(h, ttl);
    let lease = b
        .acquire(&name, LONG_TTL, bound + Duration::from_secs(5))
        .await
        .expect("acquire after expiry");
    assert!(
        t.elapsed() < bound,
        "took {:?}, bound {bound:?}",
        t.elapsed()
    );
    assert!(lease.token() > held.token());
    assert!(b.release(&lease).await.expect("release"));
}

/// Dropping `acquire` futures at random points, contended and uncontended, leaks no
/// lock: once the holder releases (and short leases from cancelled grants expire), the
/// lock is free again.
pub async fn cancelled_acquires_leak_nothing(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "cancelled_acquires_leak_nothing").await;
    let ttl = h.short_ttl();
    // contended: the waiters' futures are dropped while they wait
    let held = take(&*a, &name, LONG_TTL).await;
    for _ in 0..10 {
        let cut = Duration::from_millis(random_u64() % 60);
        let _ = timeout(cut, b.acquire(&name, ttl, Duration::from_secs(10))).await;
    }
    assert!(a.release(&held).await.expect("release"));
    let next = take_within(&*a, &name, LONG_TTL, Duration::from_secs(2))
        .await
        .expect("a cancelled waiter must not keep the lock from the next client");
    assert!(a.release(&next).await.expect("release"));
    // uncontended: a grant may land after the future is gone; it must expire by TTL
    for _ in 0..10 {
        let cut = Duration::from_micros(random_u64() % 3000);
        if let Ok(Ok(lease)) = timeout(cut, b.acquire(&name, ttl, Duration::from_secs(10))).await {
            assert!(b.release(&lease).await.expect("release"));
        }
    }
    let bound = expiry_bound(h, ttl);
    let last = take_within(&*a, &name, LONG_TTL, bound)
        .await
        .expect("a grant to a cancelled acquire must expire within its TTL");
    assert!(a.release(&last).await.expect("release"));
}

/// Waiters get the lock in the order they started waiting where the backend declares
/// `fair`; otherwise every waiter still gets it (no starvation within the bound).
pub async fn waiters_are_served_fairly(h: &impl Harness) {
    const WAITERS: usize = 5;
    let holder = h.client().await;
    let name = unique("waiters_are_served_fairly");
    let fair = holder.capabilities().fair;
    let held = take(&*holder, &name, LONG_TTL).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let c = h.client().await;
        let (name, order) = (name.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let lease = c
                .acquire(&name, LONG_TTL, Duration::from_secs(30))
                .await
                .expect("waiter acquires");
            order.lock().await.push(i);
            sleep(Duration::from_millis(20)).await;
            assert!(c.release(&lease).await.expect("release"));
        }));
        // give each waiter time to queue before the next one starts
        sleep(Duration::from_millis(150)).await;
    }
    assert!(holder.release(&held).await.expect("release"));
    crate::steps::join_within(tasks, Duration::from_secs(40), "waiters finished").await;
    let order = order.lock().await.clone();
    assert_eq!(order.len(), WAITERS, "every waiter got the lock");
    if fair {
        assert_eq!(
            order,
            (0..WAITERS).collect::<Vec<_>>(),
            "a fair backend serves FIFO"
        );
    }
}

/// Rules 7 and 8 where the backend declares them. With `Capabilities::notify`, a
/// release reaches a waiter that has waited long enough for any polling to have slowed
/// down within a bound no poll would meet: the server woke it. With `fair` as well, the
/// other waiters stay asleep: in the moments after the release none of them sends a
/// request (counted on each waiter's own network path, where its [`crate::Link`]
/// counts; one may be a coincidental renewal).
pub async fn a_release_wakes_one_waiter(h: &impl Harness) {
    const WAITERS: usize = 6;
    let holder = h.client().await;
    let caps = holder.capabilities();
    let name = unique("a_release_wakes_one_waiter");
    let held = take(&*holder, &name, LONG_TTL).await;
    let mut links = Vec::new();
    let mut waiters = tokio::task::JoinSet::new();
    for i in 0..WAITERS {
        let (c, link) = h.partitionable_client().await;
        links.push(link);
        let name = name.clone();
        waiters.spawn(async move {
            let lease = c.acquire(&name, LONG_TTL, Duration::from_secs(30)).await;
            (i, lease, Instant::now(), c)
        });
    }
    // every waiter queued or subscribed, and any poll backed off to its slowest
    sleep(Duration::from_millis(1500)).await;
    assert!(
        waiters.len() == WAITERS,
        "waiters must wait while it is held"
    );
    let before: Vec<_> = links.iter().map(|l| l.requests()).collect();
    let released = Instant::now();
    assert!(holder.release(&held).await.expect("release"));
    let (winner, lease, got_at, client) = timeout(Duration::from_secs(10), waiters.join_next())
        .await
        .expect("a waiter gets the lock after the release")
        .expect("a waiter")
        .expect("join");
    let lease = lease.expect("the woken waiter acquires");
    assert_fresh(&lease);
    let handoff = got_at.saturating_duration_since(released);
    sleep(Duration::from_millis(100)).await;
    let woken: Vec<usize> = (0..WAITERS)
        .filter(|&i| i != winner)
        .filter(|&i| match (before[i], links[i].requests()) {
            (Some(b), Some(a)) => a > b,
            _ => false,
        })
        .collect();
    let counted = before.iter().all(Option::is_some);
    assert!(client.release(&lease).await.expect("release"));
    waiters.abort_all();
    if caps.notify {
        // polling (or a notification's fallback poll, 1 s) would take longer
        assert!(
            handoff < Duration::from_millis(400),
            "a notifying backend handed the lock over in {handoff:?}"
        );
    }
    if caps.fair && counted {
        assert!(
            woken.len() <= 1,
            "a release woke waiters {woken:?} besides the next one ({winner})"
        );
    }
}
