//! Redis Sentinel failing the master over under held locks: the client follows the new
//! master, and an idle client does not lock on the old master restarted. One test in
//! this binary, so nothing else runs while the master is down.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use dlock_conformance::{
    assert_later, guarded, required_env, services_ctl, take, take_once_back, unique_name,
};
use dlock_core::DistributedLock;

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
    follows_the_promoted_replica().await;
    an_idle_client_does_not_lock_on_the_old_master_restarted().await;
}

async fn follows_the_promoted_replica() {
    let url = common::sentinel_url();
    let lock = common::redis_dyn(&url).await;
    let held = unique_name("sentinel/held");
    let ttl = Duration::from_secs(20);
    let guard = guarded(&lock, &held, ttl).await;
    let before = guard.token();
    // the replicas have the key before the master dies
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (_, old_port) = master(&url).await.expect("a master");
    let old = service_on(old_port);
    let killed = Instant::now();
    services_ctl("kill", &[&old]).await;

    // a new name, until the client reaches the promoted master
    let fresh = unique_name("sentinel/new");
    let left = (killed + Duration::from_secs(30)).saturating_duration_since(Instant::now());
    let after = take_once_back(
        &lock,
        &fresh,
        ttl,
        left,
        "no acquire 30 s after the master was killed",
    )
    .await;
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
    rejoined_as_replica(old_port).await;
}

/// Waits until the server on `port` replicates from a master: the sentinels turn a
/// returning old master into a replica some seconds after they see it, and the full
/// sync that follows waits 5 s for more replicas (`repl-diskless-sync-delay`).
async fn rejoined_as_replica(port: u16) {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
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

const SENTINELS: [&str; 3] = ["sentinel-1", "sentinel-2", "sentinel-3"];

/// Client X is connected and idle when the master dies; the sentinels promote a
/// replica and client Y takes a lock there. The old master is then started again while
/// the sentinels cannot be reached (paused), from a configuration that makes it a
/// master (as an old master's own file does: `REPLICAOF NO ONE` here, since
/// scripts/services starts the replicas with `--replicaof`); it is empty, and X's
/// connection reconnects to it by itself. X must not lock
/// there — that would be the same name held by X and Y at once. Once the sentinels are
/// back, X follows the new master and finds Y's lock.
async fn an_idle_client_does_not_lock_on_the_old_master_restarted() {
    let url = common::sentinel_url();
    let x = common::redis_dyn(&url).await;
    let y = common::redis_dyn(&url).await;
    let name = unique_name("sentinel/idle");
    let ttl = Duration::from_secs(30);
    // X has used its connection, then goes quiet
    assert!(x.inspect(&name).await.unwrap().is_none());
    let (_, old_port) = master(&url).await.expect("a master");
    let old = service_on(old_port);
    services_ctl("kill", &[&old]).await;
    let held = take_once_back(
        &y,
        &name,
        ttl,
        Duration::from_secs(30),
        "Y cannot lock after the failover",
    )
    .await;
    let (_, new_port) = master(&url).await.expect("a new master");
    assert_ne!(new_port, old_port);

    services_ctl("pause", &SENTINELS).await;
    services_ctl("start", &[&old]).await;
    // the restarted server answers as a master: what X's connection finds there
    let role: Vec<redis::Value> = {
        let client = redis::Client::open(format!("redis://127.0.0.1:{old_port}")).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut c)
            .await
            .unwrap();
        redis::cmd("ROLE").query_async(&mut c).await.unwrap()
    };
    assert!(
        matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master"),
        "the restarted old master should say it is a master: {role:?}"
    );
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        let tried = x.try_acquire(&name, ttl).await;
        if let Ok(Some(lease)) = &tried {
            let _ = x.release(lease).await;
        }
        assert!(
            !matches!(tried, Ok(Some(_))),
            "X locked on the restarted old master while Y holds the lock on the new one"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    services_ctl("resume", &SENTINELS).await;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match x.try_acquire(&name, ttl).await {
            Ok(None) => break, // Y's, on the new master
            Ok(Some(lease)) => panic!("X got a lock Y holds: {}", lease.token()),
            Err(e) => assert!(
                Instant::now() < end,
                "X never reached the new master: {e:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(y.release(&held).await.unwrap());
    let next = take(&x, &name, ttl).await;
    assert_later(&next, &held, "X after Y, on the new master");
    assert!(x.release(&next).await.unwrap());
    rejoined_as_replica(old_port).await;
}
