//! What the etcd backend promises beyond the shared suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FaultMode, guarded, take};
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
    let held = take(&holder, &n, LONG).await;
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
    let lease = take(&a, &n, Duration::from_secs(2)).await;
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
    let l = take(&lock, &n, Duration::from_millis(20)).await;
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

/// Locks with one TTL share one etcd lease (one keep-alive per tick for all of them),
/// yet each keeps its own expiry: an unrenewed lock frees after its TTL while its
/// neighbour on the same lease is renewed and stays held. Stale handles can neither
/// renew nor release; a key deleted behind the holder's back is noticed at the next
/// keep-alive; a live lease cannot be renewed through another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_lease_locks_keep_their_own_expiry() {
    let e = common::single();
    let c = common::etcd(&e).await;
    let other = common::etcd(&e).await;
    let ttl = Duration::from_secs(2);
    let (a, b) = (name("shared-a"), name("shared-b"));
    let la = take(&c, &a, ttl).await;
    let lb = take(&c, &b, ttl).await;
    let lease = lease_ids(&e, &a).await;
    assert_eq!(lease.len(), 1);
    assert_eq!(lease_ids(&e, &b).await, lease, "one lease for both");

    // a is never renewed, b is: a frees after its TTL, b stays held on the same lease.
    let started = Instant::now();
    let mut lb = lb;
    let freed = loop {
        lb = c.renew(&lb).await.unwrap();
        if let Some(next) = other.try_acquire(&a, ttl).await.unwrap() {
            break next;
        }
        assert!(
            started.elapsed() < ttl * 2 + Duration::from_secs(1),
            "an unrenewed lock must free after its TTL"
        );
        sleep(Duration::from_millis(200)).await;
    };
    assert!(
        Instant::now() >= la.valid_until(),
        "freed before the holder's valid_until"
    );
    assert!(freed.token() > la.token());
    assert!(matches!(
        c.renew(&la).await,
        Err(dlock_core::LockError::LeaseLost { .. })
    ));
    assert!(!c.release(&la).await.unwrap());
    assert_eq!(c.inspect(&b).await.unwrap().unwrap().token, lb.token());

    // a live lease belongs to the client that took it
    assert!(matches!(
        other.renew(&lb).await,
        Err(dlock_core::LockError::InvalidArgument(_))
    ));

    // released through another client: the holder notices at its next keep-alive
    assert!(other.release(&lb).await.unwrap());
    let started = Instant::now();
    loop {
        match c.renew(&lb).await {
            Err(dlock_core::LockError::LeaseLost { .. }) => break,
            Ok(l) => {
                assert!(started.elapsed() < ttl, "deleted key still renewed");
                lb = l;
            }
            Err(e) => panic!("{e}"),
        }
        sleep(Duration::from_millis(50)).await;
    }
    assert!(!c.release(&lb).await.unwrap());
    assert!(other.release(&freed).await.unwrap());
}

fn queue_key_dir(name: &LockName) -> String {
    format!(
        "dlock/{}/",
        name.as_str().replace('%', "%25").replace('/', "%2F")
    )
}

/// A key nobody tracks on the client's shared lease (a create that committed after
/// its acquisition gave up and after the sweeper's delete — planted here with the raw
/// client) would block its name for as long as any lock with that TTL is renewed. The
/// client deletes it after a grace period; the renewed neighbour stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_key_on_the_shared_lease_does_not_block_its_name() {
    let e = common::single();
    let lock: Arc<dyn DistributedLock> = Arc::new(common::etcd(&e).await);
    let ttl = Duration::from_secs(3);
    let (held, blocked) = (name("stray-held"), name("stray-blocked"));
    let guard = guarded(&lock, &held, ttl).await;
    let token = guard.token();
    let shared = lease_ids(&e, &held).await[0];
    let mut raw = etcd_client::Client::connect(&e, None).await.unwrap();
    raw.put(
        format!(
            "{}0123456789abcdef0123456789abcdef",
            queue_key_dir(&blocked)
        ),
        "",
        Some(etcd_client::PutOptions::new().with_lease(shared)),
    )
    .await
    .unwrap();
    let other = common::etcd(&e).await;
    let started = Instant::now();
    let freed = loop {
        if let Some(l) = other.try_acquire(&blocked, ttl).await.unwrap() {
            break l;
        }
        assert!(
            started.elapsed() < ttl * 4,
            "the stray key still blocks {blocked} after {:?}",
            started.elapsed()
        );
        sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        guard.state(),
        GuardState::Held,
        "the neighbour is untouched"
    );
    assert_eq!(lock.inspect(&held).await.unwrap().unwrap().token, token);
    assert!(other.release(&freed).await.unwrap());
    guard.release().await.unwrap();
}

/// A waiter whose own queued key vanishes (deleted behind its back) notices at once and
/// queues again (a transient failure, retried within its wait) instead of spinning on
/// reads until its wait runs out; the holder has released, so it gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_key_vanished_queues_again_promptly() {
    let e = common::single();
    let holder = common::etcd(&e).await;
    let waiter = common::etcd(&e).await;
    let n = name("vanished");
    let held = take(&holder, &n, LONG).await;
    let w = {
        let (waiter, n) = (waiter.clone(), n.clone());
        tokio::spawn(async move { waiter.acquire(&n, LONG, Duration::from_secs(20)).await })
    };
    sleep(Duration::from_millis(300)).await;
    let mut raw = etcd_client::Client::connect(&e, None).await.unwrap();
    let dir = queue_key_dir(&n);
    let theirs = format!("{dir}{}", held.owner());
    let resp = raw
        .get(
            dir.clone(),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let mine: Vec<String> = resp
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap().to_owned())
        .filter(|k| *k != theirs)
        .collect();
    assert_eq!(mine.len(), 1, "the waiter's key: {mine:?}");
    raw.delete(mine[0].clone(), None).await.unwrap();
    assert!(holder.release(&held).await.unwrap());
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(15), w)
        .await
        .expect("acquire returned")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let lease = outcome.expect("queued again and acquired");
    assert!(lease.token() > held.token());
    assert!(waiter.release(&lease).await.unwrap());
}

/// A revoke moves the holder's key onto a lease that outlives the holder's trust,
/// whenever the move lands: the hold lease is granted after a guard lease whose marker
/// the move requires, and outlives it by two of the holder's TTLs and a slack.
#[tokio::test]
async fn a_revoked_key_sits_on_a_lease_that_outlives_its_holders_trust() {
    let e = common::single();
    let (holder, operator) = (common::etcd(&e).await, common::etcd(&e).await);
    let n = name("revoke-leases");
    let l = take(&holder, &n, Duration::from_secs(2)).await;
    let before = lease_ids(&e, &n).await;
    assert!(operator.revoke_holder(&n).await.unwrap().is_some());
    let after = lease_ids(&e, &n).await;
    assert_eq!(after.len(), 1);
    assert_ne!(after, before, "the key moved off the holder's lease");
    let mut raw = etcd_client::Client::connect(&e, None).await.unwrap();
    let hold = raw.lease_time_to_live(after[0], None).await.unwrap();
    let marker_dir = format!(
        "dlock/%revoke/{}/",
        n.as_str().replace('%', "%25").replace('/', "%2F")
    );
    let markers = raw
        .get(
            marker_dir,
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let marker = markers.kvs().first().expect("the guard's marker");
    let guard = raw.lease_time_to_live(marker.lease(), None).await.unwrap();
    let granted = i64::try_from(l.ttl().as_secs()).unwrap();
    let past_guard = 2 * granted + granted.max(5);
    assert_eq!(
        hold.granted_ttl() - guard.granted_ttl(),
        past_guard,
        "the hold lease outlives the guard by the holder's trust and a slack"
    );
    assert!(
        hold.ttl() >= guard.ttl() + past_guard - 1,
        "{hold:?} {guard:?}"
    );
    assert!(
        !holder.release(&l).await.unwrap(),
        "the holder lets go, and learns it was revoked"
    );
    assert!(
        operator.inspect(&n).await.unwrap().is_none(),
        "the name is free"
    );
}
