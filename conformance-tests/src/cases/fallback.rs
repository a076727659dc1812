//! The fallback decorator over a real client whose path to the server is cut.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, Fallback, FallbackLock, LockError};
use tokio::time::{Instant, sleep};

use super::{LONG_TTL, unique};
use crate::Harness;

/// While the server is unreachable, `Local` serves acquisitions from an in-process
/// lock (still exclusive among its callers) and `Proceed` hands out token-0 leases,
/// each marked; `FailFast` returns the outage. After the heal, leases are real again.
pub async fn fallback_serves_an_outage(h: &impl Harness) {
    let (client, link) = h.partitionable_client().await;
    let name = unique("fallback_serves_an_outage");
    let local = FallbackLock::new(client.coordination(), Fallback::Local);
    let proceed = FallbackLock::new(client.coordination(), Fallback::Proceed);
    let fail_fast = FallbackLock::new(client.coordination(), Fallback::FailFast);
    let warm = local
        .try_acquire(&name, LONG_TTL)
        .await
        .expect("try")
        .expect("free");
    assert_eq!(
        warm.fallback(),
        None,
        "a real lease while the server answers"
    );
    assert!(local.release(&warm).await.expect("release"));

    link.cut().await;
    let ttl = h.short_ttl();
    // the local lease must outlive the next cut-off attempt; a request of it stuck in
    // the cut may still be granted after the heal, so on a name of its own
    let held_locally = unique("fallback_serves_an_outage/local");
    let bound = Duration::from_secs(30);
    let (l, p, f) = tokio::time::timeout(bound, async {
        tokio::join!(
            local.try_acquire(&held_locally, LONG_TTL),
            proceed.try_acquire(&name, ttl),
            fail_fast.try_acquire(&name, ttl),
        )
    })
    .await
    .expect("acquisitions give up on the cut server within the bound");
    let l = l.expect("local fallback").expect("the local lock is free");
    assert_eq!(l.fallback(), Some(Fallback::Local));
    assert_eq!(l.token().get(), 0, "a local lease must fail every fence");
    let p = p.expect("proceed fallback").expect("proceed always grants");
    assert_eq!(p.fallback(), Some(Fallback::Proceed));
    assert_eq!(p.token().get(), 0, "a proceed lease must fail every fence");
    assert!(matches!(f, Err(LockError::Unavailable { .. })), "{f:?}");
    let again = tokio::time::timeout(bound, local.try_acquire(&held_locally, LONG_TTL))
        .await
        .expect("gives up")
        .expect("local fallback");
    assert!(again.is_none(), "the local fallback still excludes");
    let l = local.renew(&l).await.expect("a local lease renews locally");
    assert_eq!(l.fallback(), Some(Fallback::Local));
    assert!(proceed.release(&p).await.expect("release"));

    link.heal().await;
    let local: Arc<dyn DistributedLock> = Arc::new(local);
    let end = Instant::now() + Duration::from_secs(20) + ttl + h.expiry_slack();
    // the service is back, but this process's fallback holder still excludes its
    // other callers: the in-process lock is taken first, real lease or not
    let r = local.try_acquire(&held_locally, LONG_TTL).await;
    assert!(
        matches!(r, Ok(None)),
        "a fallback holder's name was taken again: {r:?}"
    );
    assert!(local.release(&l).await.expect("release"));
    let real = loop {
        match local.try_acquire(&name, LONG_TTL).await {
            Ok(Some(lease)) if lease.fallback().is_none() => break lease,
            Ok(Some(lease)) => {
                let _ = local.release(&lease).await;
            }
            Ok(None) | Err(_) => {}
        }
        assert!(Instant::now() < end, "no real lease after the heal");
        sleep(Duration::from_millis(100)).await;
    };
    assert!(local.release(&real).await.expect("release"));
}

/// Under `Local`, the in-process companion of an acquisition is held through its whole
/// wait, not for one TTL from its start: a caller that waited longer than its TTL for
/// the real lock, and got it, still keeps this process's other callers out when the
/// service then goes down — they must not get a fallback lease beside the real one.
pub async fn fallback_companion_covers_the_wait(h: &impl Harness) {
    let (client, link) = h.partitionable_client().await;
    let other = h.client().await;
    let name = unique("fallback_companion_covers_the_wait");
    let ttl = h.short_ttl();
    let local = Arc::new(FallbackLock::new(client.coordination(), Fallback::Local));
    let outsider = super::take(&*other, &name, LONG_TTL).await;
    let waiter = crate::steps::acquiring(&local, &name, ttl, ttl * 6);
    // longer than the waiter's TTL: a companion taken for one TTL has expired by now
    sleep(ttl * 2).await;
    assert!(other.release(&outsider).await.expect("release"));
    let first = waiter
        .await
        .expect("task")
        .expect("the waiter gets the lock");
    assert_eq!(first.fallback(), None, "a real lease");
    link.cut().await;
    let second = tokio::time::timeout(Duration::from_secs(30), local.try_acquire(&name, ttl))
        .await
        .expect("gives up on the cut server within the bound");
    link.heal().await;
    assert!(
        matches!(second, Ok(None)),
        "a second caller of the process got {second:?} while the first holds the real lock"
    );
    let _ = local.release(&first).await;
}
