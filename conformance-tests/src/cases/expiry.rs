//! Server-side expiry, renewal, and stale leases after a takeover.

use std::time::Duration;

use dlock_core::{LeaseScope, LockError};
use tokio::time::{Instant, sleep, sleep_until};

use super::{LONG_TTL, assert_fresh, clients_and_name, expiry_bound, take, take_within};
use crate::Harness;

/// Renewing every third of the TTL keeps a lease for three TTLs; nobody else gets in.
pub async fn renew_keeps_lease_past_ttl(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "renew_keeps_lease_past_ttl").await;
    let ttl = h.short_ttl();
    let mut lease = take(&*a, &name, ttl).await;
    let first_token = lease.token();
    let end = Instant::now() + ttl * 3;
    while Instant::now() < end {
        sleep(ttl / 3).await;
        let renewed = a.renew(&lease).await.expect("renew while held");
        assert_eq!(renewed.token(), first_token, "renew keeps the token");
        assert_eq!(renewed.owner(), lease.owner());
        assert!(renewed.valid_until() >= lease.valid_until());
        lease = renewed;
        assert!(b.try_acquire(&name, ttl).await.expect("try").is_none());
    }
    assert!(a.release(&lease).await.expect("release"));
}

/// A lease that is not renewed: per-lease backends expire it after its TTL (by the
/// server's clock), per-session backends keep it while the client lives.
pub async fn unrenewed_lease_follows_scope(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "unrenewed_lease_follows_scope").await;
    let ttl = h.short_ttl();
    let lease = take(&*a, &name, ttl).await;
    // up to valid_until the server must still see it held (client margin is conservative)
    sleep_until(lease.valid_until() - Duration::from_millis(30).min(ttl / 10)).await;
    assert!(
        b.try_acquire(&name, ttl).await.expect("try").is_none(),
        "the server expired the lease before the client's valid_until"
    );
    match a.capabilities().lease_scope {
        LeaseScope::PerSession => {
            sleep(ttl + h.expiry_slack()).await;
            assert!(
                b.try_acquire(&name, ttl).await.expect("try").is_none(),
                "a per-session lease must live while its session does"
            );
            assert!(a.release(&lease).await.expect("release"));
        }
        _ => {
            sleep_until(lease.valid_until() + ttl + h.expiry_slack()).await;
            // expired but not yet taken over: still not renewable or releasable
            let r = a.renew(&lease).await;
            assert!(
                matches!(r, Err(LockError::LeaseLost { .. })),
                "renew of an expired lease: {r:?}"
            );
            assert!(
                !a.release(&lease).await.expect("release answers"),
                "release of an expired lease"
            );
            let next = take_within(
                &*b,
                &name,
                ttl,
                ttl + h.expiry_slack() + Duration::from_secs(1),
            )
            .await
            .expect("the server must expire an unrenewed lease after its TTL");
            assert!(next.token() > lease.token());
            assert!(b.release(&next).await.expect("release"));
        }
    }
}

/// A crashed holder's lock frees within TTL + slack, and the next token is higher.
pub async fn crashed_holder_expires(h: &impl Harness) {
    let ([a, b], name) = clients_and_name(h, "crashed_holder_expires").await;
    let ttl = h.short_ttl();
    let lease = take(&*a, &name, ttl).await;
    let crashed_at = Instant::now();
    a.crash();
    let bound = ttl + h.expiry_slack() + Duration::from_secs(1);
    let next = take_within(&*b, &name, ttl, bound + Duration::from_secs(1))
        .await
        .expect("a crashed holder's lock must free within its TTL");
    let took = crashed_at.elapsed();
    assert!(
        took <= bound + Duration::from_millis(500),
        "freed after {took:?}, bound {bound:?}"
    );
    assert!(next.token() > lease.token());
    assert!(b.release(&next).await.expect("release"));
}

/// After a takeover, the old lease can neither release nor renew the new holder's
/// lock, whether the takeover followed an expiry or a crash.
pub async fn stale_lease_cannot_touch_new_holder(h: &impl Harness) {
    let ([a, b, c], name) = clients_and_name(h, "stale_lease_cannot_touch_new_holder").await;
    let ttl = h.short_ttl();
    let stale = take(&*a, &name, ttl).await;
    let per_session = a.capabilities().lease_scope == LeaseScope::PerSession;
    if per_session {
        a.crash();
    }
    let bound = expiry_bound(h, ttl);
    let fresh = take_within(&*b, &name, LONG_TTL, bound)
        .await
        .expect("takeover");
    assert!(fresh.token() > stale.token());
    // through the old client (if it still lives) and through a third client
    let mut users = vec![&c];
    if !per_session {
        users.push(&a);
    }
    for user in users {
        assert!(
            !user.release(&stale).await.expect("stale release answers"),
            "stale release must be refused"
        );
        let r = user.renew(&stale).await;
        assert!(
            matches!(r, Err(LockError::LeaseLost { .. })),
            "stale renew: {r:?}"
        );
    }
    let info = crate::steps::holder_of(&*c, &name).await;
    assert_eq!(&info.owner, fresh.owner());
    assert_eq!(info.token, fresh.token());
    assert!(c.try_acquire(&name, ttl).await.expect("try").is_none());
    assert_fresh(&fresh);
    assert!(b.release(&fresh).await.expect("release"));
}
