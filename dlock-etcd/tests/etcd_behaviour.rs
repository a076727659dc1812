//! What the etcd backend promises beyond the shared suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::FaultMode;
use dlock_core::{DistributedLock, GuardState, LockGuard, LockName, random_u64};
use tokio::sync::Mutex;
use tokio::time::{Instant, sleep};

const LONG: Duration = Duration::from_secs(30);

fn name(case: &str) -> LockName {
    LockName::new(&format!("etcd/{case}/{:016x}", random_u64())).unwrap()
}

/// Ten waiters get the lock in the order they started waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiters_are_served_in_arrival_order() {
    let e = common::single();
    let holder = common::etcd(&e).await;
    let n = name("fifo");
    let held = holder.try_acquire(&n, LONG).await.unwrap().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..10 {
        let c = common::etcd(&e).await;
        let (n, order) = (n.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let l = c.acquire(&n, LONG, Duration::from_secs(30)).await.unwrap();
            order.lock().await.push(i);
            assert!(c.release(&l).await.unwrap());
        }));
        sleep(Duration::from_millis(60)).await;
    }
    assert!(holder.release(&held).await.unwrap());
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().await, (0..10).collect::<Vec<_>>());
}

/// A holder cut off from etcd: its guard goes suspect, then lost at `valid_until`;
/// another client gets the lock only after the server expired the holder's lease,
/// with a higher token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_holder_goes_suspect_then_lost_before_takeover() {
    let e = common::single();
    let (proxied, proxies) = common::proxied(&e).await;
    let a: Arc<dyn DistributedLock> = Arc::new(common::etcd(&proxied).await);
    let b = common::etcd(&e).await;
    let n = name("partition");
    let lease = a
        .try_acquire(&n, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    let valid_until = lease.valid_until();
    let token_a = lease.token();
    let guard = LockGuard::new(Arc::clone(&a), lease);
    sleep(Duration::from_millis(200)).await;
    proxies.set_mode(FaultMode::Blackhole);
    let waiter = {
        let n = n.clone();
        tokio::spawn(async move {
            let l = b.acquire(&n, LONG, Duration::from_secs(20)).await.unwrap();
            (l, Instant::now())
        })
    };
    let end = valid_until;
    while guard.state() == GuardState::Held && Instant::now() < end {
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        guard.state(),
        GuardState::Suspect,
        "renewals fail while cut off"
    );
    guard.lost().await;
    let lost_at = Instant::now();
    assert!(lost_at >= valid_until && lost_at < valid_until + Duration::from_millis(300));
    let (lease_b, got_at) = waiter.await.unwrap();
    assert!(
        got_at >= valid_until,
        "taken over {:?} before the holder's lease ended",
        valid_until - got_at
    );
    assert!(lease_b.token() > token_a);
    proxies.set_mode(FaultMode::Pass);
}

/// With a dead endpoint in the list every operation still succeeds (each RPC that
/// lands on it is retried on a live one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_in_the_list_causes_no_failures() {
    let mut e = common::single();
    e.push("http://127.0.0.1:1".into());
    let lock = common::etcd(&e).await;
    let n = name("dead-endpoint");
    for _ in 0..40 {
        let l = lock
            .acquire(&n, LONG, Duration::from_secs(5))
            .await
            .unwrap();
        lock.renew(&l).await.unwrap();
        assert!(lock.inspect(&n).await.unwrap().is_some());
        assert!(lock.release(&l).await.unwrap());
    }
}

/// A TTL below etcd's granularity is rounded up, never to a zero-TTL lease (which
/// etcd's own lock service would keep for 60 s).
#[tokio::test]
async fn short_ttls_round_up_to_whole_seconds() {
    let lock = common::etcd(&common::single()).await;
    let n = name("ttl");
    let l = lock
        .try_acquire(&n, Duration::from_millis(20))
        .await
        .unwrap()
        .unwrap();
    assert!(l.ttl() >= Duration::from_secs(1), "{:?}", l.ttl());
    let info = lock.inspect(&n).await.unwrap().unwrap();
    assert!(info.remaining <= Duration::from_secs(2));
    assert!(lock.release(&l).await.unwrap());
}

/// The lease behind each key under `name`'s queue, read with the raw client.
async fn lease_ids(endpoints: &[String], name: &LockName) -> Vec<i64> {
    let mut raw = etcd_client::Client::connect(endpoints, None).await.unwrap();
    let dir = format!(
        "dlock/{}/",
        name.as_str().replace('%', "%25").replace('/', "%2F")
    );
    let resp = raw
        .get(dir, Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap();
    resp.kvs()
        .iter()
        .map(etcd_client::KeyValue::lease)
        .collect()
}

/// Release takes the lease back and the next acquisition reuses it (one txn each way),
/// yet the old `Lease` can neither renew nor release the new holder; a lease released
/// through another client is revoked, so its first client's renewals fail at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_leases_never_serve_a_stale_lease() {
    let e = common::single();
    let c = common::etcd(&e).await;
    let (a, b) = (name("reuse-a"), name("reuse-b"));
    // warm up: the first acquisition grants on the path and a spare in the background
    let warm = c.try_acquire(&a, LONG).await.unwrap().unwrap();
    assert!(c.release(&warm).await.unwrap());
    sleep(Duration::from_millis(300)).await;
    let first = c.try_acquire(&a, LONG).await.unwrap().unwrap();
    let first_lease = lease_ids(&e, &a).await;
    assert!(c.release(&first).await.unwrap());
    assert!(
        lease_ids(&e, &a).await.is_empty(),
        "release deleted the key"
    );

    let second = c.try_acquire(&b, LONG).await.unwrap().unwrap();
    assert_eq!(lease_ids(&e, &b).await, first_lease, "the lease was reused");
    assert!(matches!(
        c.renew(&first).await,
        Err(dlock_core::LockError::LeaseLost { .. })
    ));
    assert!(!c.release(&first).await.unwrap());
    let renewed = c.renew(&second).await.unwrap();
    assert_eq!(renewed.token(), second.token());
    assert_eq!(c.inspect(&b).await.unwrap().unwrap().token, second.token());

    // Released by another client: deleted and revoked.
    let other = common::etcd(&e).await;
    assert!(other.release(&second).await.unwrap());
    assert!(c.inspect(&b).await.unwrap().is_none());
    assert!(matches!(
        c.renew(&second).await,
        Err(dlock_core::LockError::LeaseLost { .. })
    ));
    // ...and the client that lost it does not put the revoked lease back to work.
    let third = c.try_acquire(&a, LONG).await.unwrap().unwrap();
    assert_ne!(lease_ids(&e, &a).await, first_lease);
    assert!(c.renew(&third).await.is_ok());
    assert!(c.release(&third).await.unwrap());
}
