//! Redis data that comes back *older*: a restart from an earlier snapshot (`SAVE`, more
//! acquisitions, then `DEBUG RELOAD NOSAVE`, which reloads the old RDB file as a
//! restart would). The fencing counter goes back with it; the next token must still be
//! above every token handed out before. Private servers, so the reload touches no
//! other test's keys.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_conformance::{TestServer, take, unique_name};
use dlock_core::{DistributedLock, FencingToken, LockName, random_u64};
use dlock_redis::{RedisLock, Redlock};

const TTL: Duration = Duration::from_secs(30);

fn private_redis(dir: &std::path::Path) -> TestServer {
    let dir = dir.join(format!("{:016x}", random_u64()));
    std::fs::create_dir_all(&dir).unwrap();
    TestServer::redis(&dir, &["--enable-debug-command", "local"])
}

async fn command(port: u16, args: &[&str]) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query_async(&mut conn).await.unwrap();
}

/// Takes and releases `name` once; the token it got.
async fn cycle(lock: &dyn DistributedLock, name: &LockName) -> FencingToken {
    let lease = take(lock, name, TTL).await;
    assert!(lock.release(&lease).await.unwrap());
    lease.token()
}

/// Snapshot, three more grants, reload the snapshot on every server, grant again.
async fn tokens_survive_a_restore(lock: &dyn DistributedLock, ports: &[u16]) {
    let name = unique_name("restore");
    let first = cycle(lock, &name).await;
    for p in ports {
        command(*p, &["SAVE"]).await;
    }
    let mut last = first;
    for _ in 0..3 {
        let t = cycle(lock, &name).await;
        assert!(t > last);
        last = t;
    }
    for p in ports {
        command(*p, &["DEBUG", "RELOAD", "NOSAVE"]).await;
    }
    let after = cycle(lock, &name).await;
    assert!(
        after > last,
        "token {after} after a restore, but {last} was already handed out: a fenced store would accept the stale holder"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_redis_tokens_survive_a_restore_from_an_old_snapshot() {
    let dir = tempdir();
    let server = private_redis(&dir);
    let lock = RedisLock::connect(&format!("redis://127.0.0.1:{}", server.port))
        .await
        .unwrap();
    tokens_survive_a_restore(&lock, &[server.port]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_tokens_survive_every_node_restored_from_an_old_snapshot() {
    let dir = tempdir();
    let servers: Vec<TestServer> = (0..3).map(|_| private_redis(&dir)).collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://127.0.0.1:{}", s.port))
        .collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    // servers started a moment ago: without this they would rest for the default
    // restart delay, which is not what this test is about (the hybrid clock is)
    let lock = Redlock::builder(&urls)
        .restart_delay(Duration::ZERO)
        .connect()
        .await
        .unwrap();
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    tokens_survive_a_restore(&lock, &ports).await;
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dlock-redis-restore-{:016x}", random_u64()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
