//! Redis Sentinel failing the master over under held locks: the client follows the new
//! master. One test in this binary, so nothing else runs while the master is down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlock_conformance::{required_env, services_ctl};
use dlock_core::{DistributedLock, LockGuard, LockName, random_u64};

/// The master's `host:port` as the first sentinel that answers names it.
async fn master(sentinel_url: &str) -> Option<(String, u16)> {
    let rest = sentinel_url.strip_prefix("redis-sentinel://")?;
    let (hosts, name) = rest.split_once('/')?;
    for h in hosts.split(',') {
        let Ok(client) = redis::Client::open(format!("redis://{h}")) else {
            continue;
        };
        let Ok(mut c) = client.get_multiplexed_async_connection().await else {
            continue;
        };
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(name)
            .query_async(&mut c)
            .await
            .ok()
            .flatten();
        if addr.is_some() {
            return addr;
        }
    }
    None
}

/// The `scripts/services` name of the server listening on `port`.
fn service_on(port: u16) -> String {
    let dir = std::path::PathBuf::from(required_env("DLOCK_SVC_DIR")).join("run");
    for name in ["redis-sm", "redis-sr1", "redis-sr2"] {
        let start = std::fs::read_to_string(dir.join(format!("{name}.start"))).unwrap();
        if start.contains(&format!("--port {port} ")) {
            return name.to_owned();
        }
    }
    panic!("no sentinel-watched server on port {port}");
}

/// Kill -9 of the master: the sentinels promote a replica (down after 1 s), and the
/// client — which knows only the sentinels — goes on locking on the new master. A lock
/// held across the failover is still held there (the replicas were in sync), and
/// tokens keep rising. The old master comes back as a replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_killed_the_client_follows_the_promoted_replica() {
    let url = common::sentinel_url();
    let lock: Arc<dyn DistributedLock> = Arc::new(common::redis(&url).await);
    let held = LockName::new(&format!("sentinel/held/{:016x}", random_u64())).unwrap();
    let ttl = Duration::from_secs(20);
    let lease = lock.try_acquire(&held, ttl).await.unwrap().unwrap();
    let before = lease.token();
    let guard = LockGuard::new(Arc::clone(&lock), lease);
    // the replicas have the key before the master dies
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (_, old_port) = master(&url).await.expect("a master");
    let old = service_on(old_port);
    let killed = Instant::now();
    services_ctl("kill", &[&old]).await;

    // a new name, until the client reaches the promoted master
    let fresh = LockName::new(&format!("sentinel/new/{:016x}", random_u64())).unwrap();
    let end = killed + Duration::from_secs(30);
    let after = loop {
        match lock.try_acquire(&fresh, ttl).await {
            Ok(Some(l)) => break l,
            other => assert!(
                Instant::now() < end,
                "no acquire 30 s after the master was killed: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let followed = killed.elapsed();
    eprintln!("sentinel failover: first acquire on the new master {followed:?} after kill -9");
    let (_, new_port) = master(&url).await.expect("a new master");
    assert_ne!(new_port, old_port, "the sentinels promoted a replica");
    assert!(after.token() > before, "{} after {before}", after.token());

    // the lock held across the failover survives on the in-sync replica
    let info = lock.inspect(&held).await.unwrap().expect("still held");
    assert_eq!(info.token, before);
    assert!(guard.is_held(), "the guard renewed through the failover");
    guard.release().await.unwrap();
    lock.release(&after).await.unwrap();

    // the old master comes back and the sentinels make it a replica of the new one
    services_ctl("start", &[&old]).await;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let client = redis::Client::open(format!("redis://127.0.0.1:{old_port}")).unwrap();
        let role: Option<String> = async {
            let mut c = client.get_multiplexed_async_connection().await.ok()?;
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut c)
                .await
                .ok()?;
            Some(info)
        }
        .await;
        if role.is_some_and(|r| r.contains("role:slave") && r.contains("master_link_status:up")) {
            break;
        }
        assert!(
            Instant::now() < end,
            "the old master did not rejoin as a replica"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
