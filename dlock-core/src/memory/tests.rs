//! The in-process backend's waiting, where the conformance suite's single-waiter
//! cases do not reach.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::time::Instant;

use crate::{DistributedLock, Lease, LockError, LockName, MemoryLock};

/// Waiters' lease TTL: neither is renewed, so each runs out after it.
const TTL: Duration = Duration::from_millis(200);

/// A memory lock with `name` held for 15 s by a lease released by hand (the waiters'
/// timers were armed for its expiry).
async fn held_long(name: &str) -> (MemoryLock, LockName, Lease) {
    let lock = MemoryLock::new();
    let name = LockName::new(name).unwrap();
    let lease = lock.try_acquire(&name, Duration::from_secs(15)).await;
    let lease = lease.unwrap().expect("free");
    (lock, name, lease)
}

/// A waiter for `name` (up to 20 s), queued 20 ms after it is spawned.
async fn waiter(
    lock: &MemoryLock,
    name: &LockName,
) -> tokio::task::JoinHandle<Result<Lease, LockError>> {
    let (lock, name) = (lock.clone(), name.clone());
    let task = tokio::spawn(async move { lock.acquire(&name, TTL, Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    task
}

/// `next`'s lease, which must follow `before`'s (a higher token) within 5 s of
/// `started`: a release and one 200 ms lease running out.
async fn follows(
    next: tokio::task::JoinHandle<Result<Lease, LockError>>,
    before: &Lease,
    started: Instant,
    which: &str,
) {
    let next = next
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("the {which} after the holder before it: {e}"));
    assert!(next.token() > before.token());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the {which} waited {:?} for a release and a 200 ms lease",
        started.elapsed()
    );
}

/// A waiter queued behind another waiter must wake when that one, granted in the
/// meantime, lets its lease run out: nobody releases it, so only the waiter's own
/// timer can notice. (Before, that timer stayed armed for the expiry of the lease
/// released before — or for the end of the whole wait — found by the conformance
/// case `requeued_elections_survive_leader_kills`.)
#[tokio::test]
async fn a_waiter_behind_a_waiter_wakes_when_that_one_expires_as_holder() {
    let (lock, name, first) = held_long("memory/chain").await;
    let second = waiter(&lock, &name).await; // queued behind the holder
    let third = waiter(&lock, &name).await;
    let started = Instant::now();
    assert!(lock.release(&first).await.unwrap());
    let second = second
        .await
        .unwrap()
        .expect("the second after the first's expiry");
    // neither is renewed: the third gets it when the second's lease runs out
    follows(third, &second, started, "third").await;
}

/// The first waiter leaves (a timed-out or cancelled acquisition) while a holder ahead
/// of the next one runs out: the next waiter, first now, must have its timer armed for
/// that holder, not for the lease released before it queued.
#[tokio::test]
async fn the_waiter_that_becomes_first_arms_its_timer() {
    let (lock, name, first) = held_long("memory/leaver").await;
    let second = waiter(&lock, &name).await;
    let third = waiter(&lock, &name).await;
    let fourth = waiter(&lock, &name).await;
    let started = Instant::now();
    assert!(lock.release(&first).await.unwrap());
    let second = second.await.unwrap().expect("the second after the release");
    third.abort(); // leaves the queue; the fourth is the first waiter now
    follows(fourth, &second, started, "fourth").await;
}
