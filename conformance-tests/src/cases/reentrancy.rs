//! Reentrant scopes, built in core on every backend's lock.

use std::time::Duration;

use dlock_core::Locker;

use super::{LONG_TTL, take, unique};
use crate::Harness;

/// In a `Reentrant` scope, taking a name the scope holds nests at once (same lease,
/// same token, a hold count) instead of waiting on itself; another scope of the same
/// client and another client are still excluded, an inner release keeps the lock, and
/// the outermost release frees it for the next holder, whose token is higher.
pub async fn reentrant_scope_nests_and_excludes(h: &impl Harness) {
    let name = unique("reentrant_scope_nests_and_excludes");
    let client = h.client().await;
    let locker = Locker::new(client.lock())
        .with_ttl(LONG_TTL)
        .with_wait(Duration::from_secs(30));
    let scope = locker.reentrant();
    let outer = scope.lock(&name).await.expect("outer lock");
    let inner = tokio::time::timeout(Duration::from_secs(10), scope.lock(&name))
        .await
        .expect("a nested lock must not wait for the scope's own hold")
        .expect("nested lock");
    assert_eq!(inner.token(), outer.token(), "one lease, one token");
    assert_eq!(outer.hold_count(), 2);

    let elsewhere = locker.reentrant();
    assert!(
        elsewhere.try_lock(&name).await.expect("try_lock").is_none(),
        "another scope of the same client must be excluded"
    );
    let other = h.client().await;
    let excluded = async || {
        other
            .try_acquire(&name, LONG_TTL)
            .await
            .expect("try_acquire")
            .is_none()
    };
    assert!(excluded().await, "another client must be excluded");

    assert!(inner.release().await.expect("inner release"), "still held");
    assert_eq!(outer.hold_count(), 1);
    assert!(excluded().await, "an inner release must not free the lock");

    let before = outer.token();
    assert!(outer.release().await.expect("outermost release"));
    let next = take(&*other, &name, LONG_TTL).await;
    assert!(next.token() > before, "the next holder's token is higher");
    other.release(&next).await.expect("release");
    assert!(scope.is_empty(), "the scope forgets a released name");
}
