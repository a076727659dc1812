//! The scope's own bookkeeping on the in-process backend; the behaviour on every
//! backend is the conformance case `reentrant_scope_nests_and_excludes`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::{DistributedLock, GuardState, LockError, LockName, Locker, MemoryLock};

fn locker(backend: &MemoryLock, ttl: Duration) -> Locker {
    Locker::new(Arc::new(backend.clone()))
        .with_ttl(ttl)
        .with_wait(Duration::from_millis(200))
}

/// `name` held outside a fresh scope of the same locker: the guard, and the scope.
async fn held_elsewhere(name: &str) -> (crate::LockGuard, crate::Reentrant) {
    let locker = locker(&MemoryLock::new(), Duration::from_secs(10));
    let held = locker.lock(name).await.expect("held elsewhere");
    (held, locker.reentrant())
}

#[tokio::test]
async fn concurrent_first_takes_in_one_scope_nest_instead_of_waiting() {
    let backend = MemoryLock::new();
    let scope = locker(&backend, Duration::from_secs(10)).reentrant();
    let (a, b) = tokio::join!(scope.lock("jobs/a"), scope.lock("jobs/a"));
    let (a, b) = (a.expect("first"), b.expect("second nests, never waits"));
    assert_eq!(a.token(), b.token());
    assert_eq!(a.hold_count(), 2);
    assert!(a.release().await.expect("inner release"), "still held");
    assert_eq!(b.hold_count(), 1);
    assert!(b.release().await.expect("outer release"));
    assert!(scope.is_empty(), "a released name leaves no slot behind");
}

#[tokio::test]
async fn a_lost_hold_is_lost_at_every_level_and_cannot_be_nested_into() {
    let backend = MemoryLock::new();
    let scope = locker(&backend, Duration::from_millis(600)).reentrant();
    let outer = scope.lock("jobs/b").await.expect("outer");
    let inner = scope.lock("jobs/b").await.expect("inner");
    let name = LockName::new("jobs/b").expect("name");
    backend
        .break_holder(&name)
        .await
        .expect("break")
        .expect("was held");
    tokio::time::timeout(Duration::from_secs(5), inner.lost())
        .await
        .expect("the inner guard sees the loss");
    assert_eq!(outer.state(), GuardState::Lost);
    assert!(!outer.is_held());
    let again = scope.lock("jobs/b").await;
    assert!(
        matches!(again, Err(LockError::LeaseLost { .. })),
        "nesting into a lost hold must fail, got {again:?}"
    );
    let stale = outer.token();
    drop(inner);
    drop(outer);
    let fresh = scope
        .lock("jobs/b")
        .await
        .expect("taken anew once the lost guards are gone");
    assert!(fresh.token() > stale, "a new hold, a new token");
    assert_eq!(fresh.hold_count(), 1);
    fresh.release().await.expect("release");
}

#[tokio::test]
async fn dropping_the_last_guard_releases_the_name() {
    let backend = MemoryLock::new();
    let locker = locker(&backend, Duration::from_secs(10));
    let scope = locker.reentrant();
    let outer = scope.lock("jobs/c").await.expect("outer");
    let inner = scope.try_lock("jobs/c").await.expect("try").expect("nests");
    drop(outer); // not the last: the name stays held
    assert!(locker.try_lock("jobs/c").await.expect("try").is_none());
    assert!(inner.is_held());
    drop(inner);
    let other = locker
        .lock_within("jobs/c", Duration::from_secs(5))
        .await
        .expect("the dropped last guard's release frees it");
    other.release().await.expect("release");
    assert!(scope.is_empty());
}

#[tokio::test]
async fn a_scope_that_cannot_take_a_name_keeps_no_slot() {
    let (held, scope) = held_elsewhere("jobs/d").await;
    assert!(scope.try_lock("jobs/d").await.expect("try").is_none());
    let waited = scope.lock_within("jobs/d", Duration::from_millis(50)).await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "{waited:?}"
    );
    assert!(scope.is_empty());
    held.release().await.expect("release");
}

#[tokio::test]
async fn a_take_in_flight_does_not_stretch_another_tasks_wait() {
    let (held, scope) = held_elsewhere("jobs/e").await;
    let first = {
        let scope = scope.clone();
        tokio::spawn(async move { scope.lock_within("jobs/e", Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await; // the first waits on the backend
    let started = tokio::time::Instant::now();
    assert!(scope.try_lock("jobs/e").await.expect("try").is_none());
    let waited = scope
        .lock_within("jobs/e", Duration::from_millis(100))
        .await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "{waited:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "try_lock and a 100 ms wait took {:?} behind the first task's 10 s wait",
        started.elapsed()
    );
    held.release().await.expect("release");
    let first = first.await.expect("task").expect("the first gets it");
    let nested = scope
        .try_lock("jobs/e")
        .await
        .expect("try")
        .expect("nests now");
    assert_eq!(nested.token(), first.token());
    nested.release().await.expect("release");
    first.release().await.expect("release");
    assert!(scope.is_empty());
}

#[tokio::test]
async fn a_cancelled_take_keeps_no_slot() {
    let (held, scope) = held_elsewhere("jobs/f").await;
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        scope.lock_within("jobs/f", Duration::from_secs(10)),
    )
    .await;
    assert!(cancelled.is_err(), "dropped while it waited");
    assert!(
        scope.is_empty(),
        "the dropped acquisition left its slot behind"
    );
    held.release().await.expect("release");
}
