//! A PostgreSQL standby that fell behind, promoted: the failover to an asynchronous
//! standby, on the pair `scripts/services up --cluster` starts.
//!
//! The standby's replication is pointed at a fault proxy in front of the primary, and
//! cut: the workload moves on without it. The standby is then promoted and every
//! worker's connection moved to it, as a virtual IP or DNS name moved by a failover
//! manager would. What the workers see afterwards is a primary that lacks the last
//! grants. `services-ctl rebuild pg-standby` makes it a fresh standby afterwards.

use std::time::Duration;

use dlock_conformance::{FaultMode, FaultProxy, url_host_port};
use tokio::process::Command;
use tokio::time::sleep;

/// The standby, its replication fed through a proxy.
pub struct Standby {
    url: String,
    addr: String,
    feed: FaultProxy,
}

impl Standby {
    /// Points the standby at `standby_url` to replicate from `primary` (`host:port`)
    /// through a new proxy, and waits until it streams through it.
    pub async fn attach(primary: &str, standby_url: &str) -> Option<Self> {
        let feed = FaultProxy::start(primary).await.ok()?;
        let addr = url_host_port(standby_url)?;
        let url = standby_url.to_owned();
        let port = feed.addr().port();
        let conninfo = format!("host=127.0.0.1 port={port} user=postgres application_name=drill");
        psql(
            &url,
            &format!("ALTER SYSTEM SET primary_conninfo = '{conninfo}'"),
        )
        .await?;
        psql(&url, "SELECT pg_reload_conf()").await?;
        let standby = Self { url, addr, feed };
        // the standby's WAL receiver restarts on the new conninfo; one that fails to
        // connect retries after wal_retrieve_retry_interval (5 s): a generous bound,
        // since a CI machine under load missed 10 s once
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            let through = psql(
                &standby.url,
                "SELECT sender_port FROM pg_stat_wal_receiver WHERE status = 'streaming'",
            )
            .await;
            if through.as_deref() == Some(port.to_string().as_str()) {
                return Some(standby);
            }
            sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Cuts replication: the standby falls behind from now on.
    pub fn cut(&self) {
        self.feed.set_mode(FaultMode::Blackhole);
    }

    /// Promotes the standby (waiting until it takes writes); its `host:port`.
    pub async fn promote(&self) -> Option<&str> {
        let done = psql(&self.url, "SELECT pg_promote(true, 30)").await?;
        (done == "t").then_some(self.addr.as_str())
    }
}

/// Runs one statement with `psql`; its output, trimmed, when it succeeded within
/// 40 s (the promotion waits up to 30 s of them) — a server that hangs fails the drill
/// rather than the whole suite.
async fn psql(url: &str, sql: &str) -> Option<String> {
    let run = Command::new("psql")
        .args(["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(40), run)
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
