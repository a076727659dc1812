//! What the ZooKeeper backend promises beyond the shared suite.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FaultMode, assert_config_error, assert_unreachable, guarded, take};
use dlock_core::{DistributedLock, GuardState, LockName, random_u64};
use dlock_zk::ZkLock;
use tokio::time::{Instant, sleep, timeout};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(30);

fn name(case: &str) -> LockName {
    LockName::new(&format!("zk-{case}-{:016x}", random_u64())).unwrap()
}

async fn raw(addr: &str) -> zk::Client {
    zk::Client::connect(addr).await.unwrap()
}

/// 100 waiting acquires cancelled at random points while the lock is held: once the
/// holder releases, the lock is free at once and no node is left in the queue.
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_leave_no_ghost_nodes() {
    let addr = common::single();
    let holder = common::zk(&addr).await;
    let waiter = common::zk(&addr).await;
    let n = name("cancel");
    let held = take(&holder, &n, LONG).await;
    for _ in 0..100 {
        let cut = Duration::from_micros(random_u64() % 5000);
        let _ = timeout(cut, waiter.acquire(&n, LONG, Duration::from_secs(10))).await;
    }
    // the clean-ups run in the background; give them a moment, then look
    let queue = format!("/dlock/{}", n.as_str());
    let zk = raw(&addr).await;
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let children = zk.list_children(&queue).await.unwrap();
        if children.len() == 1 {
            break;
        }
        assert!(Instant::now() < end, "ghost nodes remain: {children:?}");
        sleep(Duration::from_millis(20)).await;
    }
    assert!(holder.release(&held).await.unwrap());
    let next = take(&waiter, &n, LONG).await;
    assert!(next.token() > held.token());
    assert!(waiter.release(&next).await.unwrap());
    assert!(zk.list_children(&queue).await.unwrap().is_empty());
}

/// A holder cut off past its session timeout loses its session: its guard reports
/// lost, another client takes the lock with a higher token, and the cut-off client
/// works again (with a new session) once healed.
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_session_loses_the_lock_to_a_higher_token() {
    let addr = common::single();
    let (proxied, proxies) = common::proxied(&addr).await;
    let a: Arc<dyn DistributedLock> = Arc::new(common::zk(&proxied).await);
    let b = common::zk(&addr).await;
    let n = name("expire");
    let guard = guarded(&a, &n, LONG).await;
    let token_a = guard.token();
    proxies.set_mode(FaultMode::Blackhole);
    timeout(common::SESSION * 4, guard.lost())
        .await
        .expect("the guard must report lost");
    assert_eq!(guard.state(), GuardState::Lost);
    let next = b.acquire(&n, LONG, Duration::from_secs(10)).await.unwrap();
    assert!(next.token() > token_a);
    proxies.set_mode(FaultMode::Pass);
    assert!(b.release(&next).await.unwrap());
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match a.try_acquire(&n, LONG).await {
            Ok(Some(l)) => {
                assert!(l.token() > next.token());
                assert!(a.release(&l).await.unwrap());
                break;
            }
            other => assert!(
                Instant::now() < end,
                "no recovery with a new session: {other:?}"
            ),
        }
        sleep(Duration::from_millis(100)).await;
    }
}

/// With digest credentials the lock nodes carry `creator_all`: another ZooKeeper user
/// cannot delete them, and the lock still works for the owner.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn authenticated_nodes_cannot_be_deleted_by_others() {
    let addr = common::single();
    let lock = ZkLock::builder(&addr)
        .root("/dlock-auth")
        .auth("app", "s3cret")
        .connect()
        .await
        .unwrap();
    let n = name("acl");
    let lease = take(&lock, &n, LONG).await;
    let queue = format!("/dlock-auth/{}", n.as_str());
    let stranger = raw(&addr).await;
    assert_eq!(
        stranger.list_children(&queue).await,
        Err(zk::Error::NoAuth),
        "strangers cannot even list"
    );
    let friend = zk::Client::connector()
        .with_auth("digest", b"app:s3cret")
        .connect(&addr)
        .await
        .unwrap();
    let children = friend.list_children(&queue).await.unwrap();
    assert_eq!(children.len(), 1);
    let r = stranger
        .delete(&format!("{queue}/{}", children[0]), None)
        .await;
    assert_eq!(
        r,
        Err(zk::Error::NoAuth),
        "a stranger deleted our lock node"
    );
    assert!(lock.release(&lease).await.unwrap());
}

/// A password in a `zk://` URL may hold any character, percent-encoded: the digest
/// the server gets is the decoded one.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn a_percent_encoded_password_is_decoded() {
    let addr = common::single();
    let url = format!("zk://app:p%3Fa%23s%2Fs%25w%40rd%3Ax@{addr}?root=/dlock-auth-encoded");
    let lock = ZkLock::from_url(&url).await.unwrap();
    let n = name("encoded");
    let lease = take(&lock, &n, LONG).await;
    let queue = format!("/dlock-auth-encoded/{}", n.as_str());
    let list_as = |digest: &'static [u8]| {
        let addr = addr.clone();
        let queue = queue.clone();
        async move {
            let client = zk::Client::connector()
                .with_auth("digest", digest)
                .connect(&addr)
                .await
                .unwrap();
            client.list_children(&queue).await.map(|c| c.len())
        }
    };
    assert_eq!(
        list_as(b"app:p?a#s/s%w@rd:x").await,
        Ok(1),
        "the decoded password"
    );
    assert_eq!(
        list_as(b"app:p%3Fa%23s%2Fs%25w%40rd%3Ax").await,
        Err(zk::Error::NoAuth),
        "not the encoded text"
    );
    assert!(lock.release(&lease).await.unwrap());
}

/// A chroot in the address puts every node under it.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn chroot_in_the_address_scopes_the_nodes() {
    let addr = common::single();
    let lock = ZkLock::builder(&format!("{addr}/apps/billing"))
        .session_timeout(common::SESSION)
        .connect()
        .await
        .unwrap();
    let n = name("chroot");
    let lease = take(&lock, &n, LONG).await;
    let zk = raw(&addr).await;
    let children = zk
        .list_children(&format!("/apps/billing/dlock/{}", n.as_str()))
        .await
        .unwrap();
    assert_eq!(children.len(), 1);
    assert!(children[0].starts_with(&format!("lock-{}-", lease.owner())));
    assert!(lock.release(&lease).await.unwrap());
}

#[tokio::test]
async fn bad_addresses_are_typed_errors() {
    assert_config_error(ZkLock::connect("").await, "");
    assert_config_error(ZkLock::connect("127.0.0.1:1,").await, "");
    let nobody = ZkLock::builder("127.0.0.1:1").timeout(Duration::from_millis(500));
    assert_unreachable(nobody.connect(), "", Duration::from_secs(5)).await;
}

/// Without a pinned session timeout, a lock goes on a session whose timeout is the TTL
/// asked for: a holder cut off with a 2 s TTL loses the lock about 2 s later (not after
/// the 10 s of the session opened at connect), and a lease reports 3/5 of its session
/// timeout as its TTL (what a confirmed renewal keeps it trusted for).
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_follow_the_ttl_asked_for() {
    use dlock_conformance::Link;
    let addr = common::single();
    let (proxied, link) = common::proxied(&addr).await;
    let holder = ZkLock::builder(&proxied)
        .timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    let other = ZkLock::builder(&addr).connect().await.unwrap();
    let ttl = Duration::from_secs(2);
    let n = name("ttl");
    let lease = take(&holder, &n, ttl).await;
    assert_eq!(lease.ttl(), ttl * 3 / 5);
    let longer = take(&holder, &name("ttl-longer"), ttl * 2).await;
    assert_eq!(longer.ttl(), ttl * 2 * 3 / 5, "a session of its own");
    link.cut().await;
    let cut = Instant::now();
    let taken = other
        .acquire(&n, LONG, Duration::from_secs(20))
        .await
        .unwrap();
    let took = cut.elapsed();
    assert!(
        took < ttl + Duration::from_millis(1500),
        "the lock of a cut-off holder with a {ttl:?} TTL was freed after {took:?}"
    );
    assert!(taken.token() > lease.token());
    assert!(other.release(&taken).await.unwrap());
    link.heal().await;
}
