//! The in-process backend's waiting, where the conformance suite's single-waiter
//! cases do not reach.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::time::Instant;

use crate::{DistributedLock, LockName, MemoryLock};

/// A waiter queued behind another waiter must wake when that one, granted in the
/// meantime, lets its lease run out: nobody releases it, so only the waiter's own
/// timer can notice. (Before, that timer stayed armed for the expiry of the lease
/// released before — or for the end of the whole wait — found by the conformance
/// case `requeued_elections_survive_leader_kills`.)
#[tokio::test]
async fn a_waiter_behind_a_waiter_wakes_when_that_one_expires_as_holder() {
    let lock = MemoryLock::new();
    let name = LockName::new("memory/chain").unwrap();
    let ttl = Duration::from_millis(200);
    // a long lease, released by hand: the waiters' timers were armed for its expiry
    let first = lock
        .try_acquire(&name, Duration::from_secs(15))
        .await
        .unwrap()
        .expect("free");
    let second = {
        let (lock, name) = (lock.clone(), name.clone());
        tokio::spawn(async move { lock.acquire(&name, ttl, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await; // queued behind the holder
    let third = {
        let (lock, name) = (lock.clone(), name.clone());
        tokio::spawn(async move { lock.acquire(&name, ttl, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = Instant::now();
    assert!(lock.release(&first).await.unwrap());
    let second = second
        .await
        .unwrap()
        .expect("the second after the first's expiry");
    // neither is renewed: the third gets it when the second's lease runs out
    let third = third
        .await
        .unwrap()
        .expect("the third after the second's expiry");
    assert!(third.token() > second.token());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the third waited {:?} for a release and a 200 ms lease",
        started.elapsed()
    );
}

/// The first waiter leaves (a timed-out or cancelled acquisition) while a holder ahead
/// of the next one runs out: the next waiter, first now, must have its timer armed for
/// that holder, not for the lease released before it queued.
#[tokio::test]
async fn the_waiter_that_becomes_first_arms_its_timer() {
    let lock = MemoryLock::new();
    let name = LockName::new("memory/leaver").unwrap();
    let ttl = Duration::from_millis(200);
    let first = lock
        .try_acquire(&name, Duration::from_secs(15))
        .await
        .unwrap()
        .expect("free");
    let wait = |lock: MemoryLock, name: LockName| {
        tokio::spawn(async move { lock.acquire(&name, ttl, Duration::from_secs(20)).await })
    };
    let second = wait(lock.clone(), name.clone());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let third = wait(lock.clone(), name.clone());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let fourth = wait(lock.clone(), name.clone());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = Instant::now();
    assert!(lock.release(&first).await.unwrap());
    let second = second.await.unwrap().expect("the second after the release");
    third.abort(); // leaves the queue; the fourth is the first waiter now
    let fourth = fourth
        .await
        .unwrap()
        .expect("the fourth after the second's expiry");
    assert!(fourth.token() > second.token());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the fourth waited {:?} for a release and a 200 ms lease",
        started.elapsed()
    );
}
