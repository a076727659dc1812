//! Mutual exclusion, owner-checked release and renew, inspect, arguments.

use std::time::{Duration, Instant};

use dlock_core::{LeaseScope, LockError, LockName, MIN_TTL};

use super::{LONG_TTL, assert_fresh, clients_and_name, take, unique};
use crate::Harness;

/// A free lock is granted with a sane lease: name, TTL, validity, token, owner.
pub async fn acquire_free_lock(h: &impl Harness) {
    let c = h.client().await;
    let name = unique("acquire_free_lock");
    let sent = tokio::time::Instant::now();
    let lease = take(&*c, &name, LONG_TTL).await;
    assert_eq!(lease.name(), &name);
    assert!(lease.token().get() >= 1, "tokens start at 1 or above");
    match c.capabilities().lease_scope {
        // a per-session lease lives as long as the session: its TTL is the session timeout
        LeaseScope::PerSession => assert!(lease.ttl() > Duration::ZERO),
        _ => assert!(
            lease.ttl() >= LONG_TTL,
            "effective ttl {:?} shorter than requested",
            lease.ttl()
        ),
    }
    assert!(
        lease.valid_until() <= sent + lease.ttl(),
        "valid_until must not be later than send time + ttl"
    );
    assert!(lease.remaining() > lease.ttl() / 2);
    assert!(c.release(&lease).await.expect("release"));
}

/// While one client holds a lock, no other client (and no second call of the same
/// client) gets it.
pub async fn mutual_exclusion(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "mutual_exclusion").await;
    let lease = take(&*a, &name, LONG_TTL).await;
    assert!(b.try_acquire(&name, LONG_TTL).await.expect("try").is_none());
    assert!(
        a.try_acquire(&name, LONG_TTL).await.expect("try").is_none(),
        "locks are not reentrant"
    );
    let r = b.acquire(&name, LONG_TTL, Duration::from_millis(300)).await;
    assert!(matches!(r, Err(LockError::Timeout { .. })), "{r:?}");
    assert!(a.release(&lease).await.expect("release"));
}

/// After a release another client gets the lock at once.
pub async fn release_frees_lock(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "release_frees_lock").await;
    let lease = take(&*a, &name, LONG_TTL).await;
    assert!(a.release(&lease).await.expect("release"));
    let next = take(&*b, &name, LONG_TTL).await;
    assert!(b.release(&next).await.expect("release"));
}

/// Releasing twice: `true`, then `false`; the second call changes nothing.
pub async fn release_is_idempotent(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "release_is_idempotent").await;
    let lease = take(&*a, &name, LONG_TTL).await;
    assert!(a.release(&lease).await.expect("release"));
    assert!(!a.release(&lease).await.expect("second release"));
    let next = take(&*b, &name, LONG_TTL).await;
    // the old lease still cannot release the new holder
    assert!(!a.release(&lease).await.expect("stale release"));
    assert!(b.try_acquire(&name, LONG_TTL).await.expect("try").is_none());
    let info = b.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(&info.owner, next.owner());
    assert!(b.release(&next).await.expect("release"));
}

/// Renewing a released lease is refused with `LeaseLost`.
pub async fn renew_after_release_is_lost(h: &impl Harness) {
    let a = h.client().await;
    let name = unique("renew_after_release_is_lost");
    let lease = take(&*a, &name, LONG_TTL).await;
    assert!(a.release(&lease).await.expect("release"));
    let r = a.renew(&lease).await;
    assert!(matches!(r, Err(LockError::LeaseLost { .. })), "{r:?}");
}

/// `inspect` reports nothing for a free lock, the holder's owner and token while held,
/// and nothing again after release.
pub async fn inspect_reports_holder(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "inspect_reports_holder").await;
    assert!(b.inspect(&name).await.expect("inspect").is_none());
    let lease = take(&*a, &name, LONG_TTL).await;
    let info = b.inspect(&name).await.expect("inspect").expect("held");
    assert_eq!(&info.owner, lease.owner());
    assert_eq!(info.token, lease.token());
    assert!(info.remaining <= lease.ttl() + Duration::from_secs(1));
    assert!(info.remaining > Duration::ZERO);
    assert!(a.release(&lease).await.expect("release"));
    assert!(b.inspect(&name).await.expect("inspect").is_none());
}

/// Every acquisition gets a fresh owner id, even by the same client.
pub async fn owner_ids_are_unique(h: &impl Harness) {
    let a = h.client().await;
    let name = unique("owner_ids_are_unique");
    let first = take(&*a, &name, LONG_TTL).await;
    assert!(a.release(&first).await.expect("release"));
    let second = take(&*a, &name, LONG_TTL).await;
    assert_ne!(first.owner(), second.owner());
    assert!(a.release(&second).await.expect("release"));
}

/// Bad TTLs are rejected with `InvalidArgument` before anything reaches the server;
/// bad names cannot even be built.
pub async fn invalid_arguments(h: &impl Harness) {
    let a = h.client().await;
    let name = unique("invalid_arguments");
    for ttl in [Duration::ZERO, MIN_TTL / 2] {
        let r = a.try_acquire(&name, ttl).await;
        assert!(
            matches!(r, Err(LockError::InvalidArgument(_))),
            "{ttl:?}: {r:?}"
        );
        let r = a.acquire(&name, ttl, Duration::from_millis(10)).await;
        assert!(
            matches!(r, Err(LockError::InvalidArgument(_))),
            "{ttl:?}: {r:?}"
        );
    }
    let r = a
        .try_acquire(&name, Duration::from_secs(400 * 24 * 3600))
        .await;
    assert!(matches!(r, Err(LockError::InvalidArgument(_))), "{r:?}");
    // a declared bound on the TTL is kept: above it refused, at it taken
    if let Some(max) = a.capabilities().max_ttl {
        let r = a.try_acquire(&name, max + Duration::from_secs(1)).await;
        assert!(matches!(r, Err(LockError::InvalidArgument(_))), "{r:?}");
        let at_max = a.try_acquire(&name, max).await.expect("the max TTL");
        let lease = at_max.expect("a free name");
        assert!(a.release(&lease).await.expect("release"));
    }
    for bad in ["", "new\nline", &"x".repeat(257)] {
        assert!(matches!(
            LockName::new(bad),
            Err(LockError::InvalidName { .. })
        ));
    }
    assert!(
        a.inspect(&name).await.expect("inspect").is_none(),
        "nothing was taken"
    );
}

/// Holding one name does not block another, and `try_acquire` on a free name is fast.
pub async fn independent_names(h: &impl Harness) {
    let ([a, b], base) = clients_and_name(h, "independent_names").await;
    let first = take(&*a, &base, LONG_TTL).await;
    let t = Instant::now();
    let other = LockName::new(&format!("{base}-other")).expect("name");
    let second = take(&*b, &other, LONG_TTL).await;
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_fresh(&second);
    assert!(a.release(&first).await.expect("release"));
    assert!(b.release(&second).await.expect("release"));
}
