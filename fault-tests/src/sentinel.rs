//! Redis Sentinel's master failed over to a replica that fell behind, on the master
//! and two replicas `scripts/services up --cluster` starts under three sentinels.
//!
//! The replicas are paused (`SIGSTOP`) and their links closed by the master, so they
//! fall behind while the workload moves on; then the master is killed and the replicas resumed: the sentinels promote one
//! that lacks the last grants, and the workers — who know only the sentinels — follow
//! it. Afterwards the old master is started again and the sentinels make it a replica.

use std::path::Path;
use std::time::Duration;

use tokio::time::sleep;

use crate::nemesis::services;

/// A key written to the master once the replicas are paused: it must be gone from the
/// promoted one, or the replica did not fall behind and the fault was not applied.
const MARKER: &str = "dlock-faults:sentinel-marker";

/// The servers the sentinels watch, by `scripts/services` name.
pub const SERVERS: [&str; 3] = ["redis-sm", "redis-sr1", "redis-sr2"];

/// The master's address as the first sentinel of `url` (`redis-sentinel://…/name`)
/// that answers names it.
pub async fn master(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("redis-sentinel://")?;
    let (hosts, name) = rest.split_once('/')?;
    let name = name.split(['/', '?']).next()?;
    for h in hosts.split(',') {
        let ask = async {
            let client = redis::Client::open(format!("redis://{h}")).ok()?;
            let mut c = client.get_multiplexed_async_connection().await.ok()?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(name)
                .query_async::<Option<(String, u16)>>(&mut c)
                .await
                .ok()
                .flatten()
        };
        if let Ok(Some(addr)) = tokio::time::timeout(Duration::from_secs(2), ask).await {
            return Some(addr);
        }
    }
    None
}

/// The `scripts/services` name of the watched server listening on `port`.
#[must_use]
pub fn service_on(port: u16) -> Option<&'static str> {
    let dir = std::path::PathBuf::from(std::env::var_os("DLOCK_SVC_DIR")?).join("run");
    SERVERS.into_iter().find(|name| {
        std::fs::read_to_string(dir.join(format!("{name}.start")))
            .is_ok_and(|s| s.contains(&format!("--port {port} ")))
    })
}

/// Pauses the replicas, lets the workload run 1.5 s, kills the master and resumes the
/// replicas; whether all of it could be done.
pub async fn fail_over_to_a_lagging_replica(script: &Path, url: &str) -> bool {
    let Some((host, port)) = master(url).await else {
        return false;
    };
    let Some(old) = service_on(port) else {
        return false;
    };
    let master_addr = format!("{host}:{port}");
    let replicas: Vec<&str> = SERVERS.into_iter().filter(|s| *s != old).collect();
    let paused = services(script, "pause", &replicas).await;
    // what the master had sent before sits in the paused replicas' socket buffers and
    // would reach them on resume: close their links, so nothing after this does (a
    // paused replica cannot reconnect)
    let cut = command(&master_addr, &["CLIENT", "KILL", "TYPE", "replica"])
        .await
        .is_some();
    let marked = command(&master_addr, &["SET", MARKER, "1"]).await == Some(true);
    // the workload moves on without the replicas: holders change, counters grow
    sleep(Duration::from_millis(1500)).await;
    let killed = services(script, "kill", &[old]).await;
    let resumed = services(script, "resume", &replicas).await;
    paused && cut && marked && killed && resumed
}

/// Sends one command to `addr` (`host:port`); whether its integer or status answer
/// was `1` / `OK`, `None` when it could not be asked.
async fn command(addr: &str, args: &[&str]) -> Option<bool> {
    let ask = async {
        let client = redis::Client::open(format!("redis://{addr}")).ok()?;
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        let mut cmd = redis::cmd(args.first()?);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let v: redis::Value = cmd.query_async(&mut c).await.ok()?;
        Some(
            matches!(v, redis::Value::Int(1) | redis::Value::Okay)
                || matches!(&v, redis::Value::SimpleString(s) if s == "OK"),
        )
    };
    tokio::time::timeout(Duration::from_secs(5), ask)
        .await
        .ok()?
}

/// Whether the promoted master lacks the marker (it fell behind, as staged); then
/// starts every watched server that is down and waits until the master the sentinels
/// name has both replicas in sync again. Whether all of that held, within 60 s.
pub async fn restore(script: &Path, url: &str) -> bool {
    let mut lagged = false;
    if let Some((host, port)) = master(url).await {
        let addr = format!("{host}:{port}");
        // EXISTS answers 0 when the promoted replica never got the marker
        lagged = command(&addr, &["EXISTS", MARKER]).await == Some(false);
        let _ = command(&addr, &["DEL", MARKER]).await;
    }
    if !services(script, "start", &SERVERS).await {
        return false;
    }
    for _ in 0..300 {
        if let Some((host, port)) = master(url).await
            && let Some(info) =
                crate::nemesis::redis_info(&format!("{host}:{port}"), "replication").await
            && info.contains("role:master")
            && info.matches("state=online").count() == 2
        {
            return lagged;
        }
        sleep(Duration::from_millis(200)).await;
    }
    false
}
