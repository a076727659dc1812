//! Real Redis servers stopped, killed and restarted under held locks. One test in this
//! binary, so nothing else runs against the servers while they are down.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use dlock_conformance::{guarded, services_ctl, take, take_once_back, unique_name};
use dlock_core::{DistributedLock, GuardState, LockError};

const LONG: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_restarting_under_held_locks() {
    single_redis_restart_mid_hold().await;
    redlock_nodes_killed_and_restarted().await;
}

/// The guard goes suspect while Redis is down, lost when Redis comes back without the
/// key, and a later acquire works with a larger token.
async fn single_redis_restart_mid_hold() {
    let url = common::redis_url();
    let lock = common::redis_dyn(&url).await;
    let n = unique_name("restart");
    let ttl = Duration::from_secs(3);
    let guard = guarded(&lock, &n, ttl).await;
    let before = guard.token();
    services_ctl("stop", &["redis"]).await;
    let end = Instant::now() + ttl;
    while guard.state() == GuardState::Held && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        guard.state(),
        GuardState::Suspect,
        "renewals fail while the server is down"
    );
    assert!(
        guard.is_held(),
        "suspect, not yet lost: the lease may still be valid"
    );
    services_ctl("start", &["redis"]).await;
    tokio::time::timeout(ttl * 2, guard.lost())
        .await
        .expect("lost once the key is gone");
    assert_eq!(guard.state(), GuardState::Lost);
    let after = take_once_back(
        &lock,
        &n,
        LONG,
        Duration::from_secs(10),
        "no acquire after restart",
    )
    .await;
    assert!(
        after.token() > before,
        "{} after {before}: the reseeded counter went back",
        after.token()
    );
    assert!(lock.release(&after).await.unwrap());
}

/// Redlock refuses a TTL longer than its restart delay, keeps granting with 2 of 5 nodes killed, refuses with 3, and when they
/// return (empty: no persistence) grants nothing through them until their restart delay
/// has passed (Redlock's delayed restart: a quorum of 3 forgetful nodes would have
/// granted at once), then recovers; its tokens increase throughout.
async fn redlock_nodes_killed_and_restarted() {
    const REST: Duration = Duration::from_secs(3);
    let urls = common::redlock_urls();
    let lock = common::redlock_resting(&urls, REST).await;
    let n = unique_name("restart/redlock");
    // a lease the delay would not outlast is refused: a node restarted empty must not
    // grant the name again while a lease it forgot still runs
    let r = lock.try_acquire(&n, REST + Duration::from_secs(1)).await;
    assert!(
        matches!(&r, Err(LockError::InvalidArgument(m)) if m.contains("restart delay")),
        "{r:?}"
    );
    let first = take(&lock, &n, REST).await;
    let mut last = first.token();
    assert!(lock.release(&first).await.unwrap());
    let take = |lock: &dlock_redis::Redlock| {
        let (lock, n) = (lock.clone(), n.clone());
        async move {
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                match lock.acquire(&n, REST, Duration::from_secs(2)).await {
                    Ok(l) => return l,
                    Err(e) => assert!(Instant::now() < end, "{e}"),
                }
            }
        }
    };

    services_ctl("kill", &["redis-r1", "redis-r2"]).await;
    let l = take(&lock).await;
    assert!(l.token() > last);
    last = l.token();
    assert!(lock.release(&l).await.unwrap());

    services_ctl("kill", &["redis-r3"]).await;
    let r = lock.try_acquire(&n, REST).await;
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");

    services_ctl("start", &["redis-r1", "redis-r2", "redis-r3"]).await;
    let back = Instant::now();
    let mut said_why = false;
    let l = loop {
        match lock.try_acquire(&n, REST).await {
            Ok(Some(l)) => break l,
            Ok(None) => panic!("nobody holds {n}"),
            // connections come back first, then the nodes rest
            Err(LockError::Unavailable { message, .. }) => {
                said_why |= message.contains("restart delay");
                assert!(back.elapsed() < Duration::from_secs(15), "{message}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(said_why, "the refusals named the restart delay");
    assert!(
        back.elapsed() >= REST - Duration::from_millis(1100),
        "granted {:?} after 3 nodes came back empty, within their restart delay",
        back.elapsed()
    );
    assert!(l.token() > last, "{} after {last}", l.token());
    assert!(lock.release(&l).await.unwrap());
}
