//! The server becomes unreachable, then comes back.

use std::time::Duration;

use dlock_core::LockError;
use tokio::time::{Instant, sleep};

use super::{LONG_TTL, take_and_release, unique};
use crate::Harness;

/// With the network path cut, operations fail with `Unavailable` (or `Timeout` for a
/// bounded `acquire`) within a bound instead of hanging, and no lease is returned;
/// once healed the same client works again.
pub async fn unreachable_server_then_recovery(h: &impl Harness) {
    let (client, link) = h.partitionable_client().await;
    let name = unique("unreachable_server_then_recovery");
    // warm up: the client is connected and works
    take_and_release(&*client, &name, LONG_TTL).await;
    link.cut().await;
    // requests stuck in the cut path may still be granted after the heal: keep them short
    let ttl = h.short_ttl();
    let bound = Duration::from_secs(15);
    let t = Instant::now();
    let r = tokio::time::timeout(bound, client.try_acquire(&name, ttl))
        .await
        .expect("try_acquire must give up within the bound while the server is unreachable");
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");
    let r = tokio::time::timeout(bound, client.inspect(&name))
        .await
        .expect("inspect gives up");
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");
    let r = tokio::time::timeout(bound, client.acquire(&name, ttl, Duration::from_secs(1)))
        .await
        .expect("acquire gives up");
    assert!(
        matches!(
            r,
            Err(LockError::Unavailable { .. } | LockError::Timeout { .. })
        ),
        "{r:?}"
    );
    assert!(t.elapsed() < bound * 3);
    link.heal().await;
    let end = Instant::now() + Duration::from_secs(20) + ttl + h.expiry_slack();
    let lease = loop {
        match client.try_acquire(&name, LONG_TTL).await {
            Ok(Some(lease)) => break lease,
            Ok(None) => {
                // a grant whose reply was lost in the partition holds it until its TTL
                assert!(Instant::now() < end, "lock never came free");
            }
            Err(e) => assert!(Instant::now() < end, "no recovery after heal: {e}"),
        }
        sleep(Duration::from_millis(100)).await;
    };
    assert!(client.release(&lease).await.expect("release"));
}

/// An `acquire` that meets an outage keeps trying within its `wait` (the trait's rule
/// for transient errors): cut for 3 s, longer than any harness's operation timeout,
/// then healed; the same `acquire` returns the lease.
pub async fn acquire_rides_out_a_short_outage(h: &impl Harness) {
    let (client, link) = h.partitionable_client().await;
    let name = unique("acquire_rides_out_a_short_outage");
    take_and_release(&*client, &name, LONG_TTL).await;
    link.cut().await;
    let waiting = {
        let (lock, name) = (client.lock(), name.clone());
        tokio::spawn(async move { lock.acquire(&name, LONG_TTL, Duration::from_secs(40)).await })
    };
    sleep(Duration::from_secs(3)).await;
    link.heal().await;
    let lease = tokio::time::timeout(Duration::from_secs(45), waiting)
        .await
        .expect("acquire returns within its wait")
        .expect("acquire task")
        .expect("acquire rides out the outage instead of failing at its first error");
    assert!(lease.is_valid());
    assert!(client.release(&lease).await.expect("release"));
}
