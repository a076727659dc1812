//! A Redis replica that falls behind and is then promoted: the failover a lagging
//! replica brings about, staged on the one server the workers know.
//!
//! The workers keep their address, so instead of moving them to the replica, the
//! primary takes the replica's (older) data: replication is cut, the workload moves
//! on, the replica is promoted, and the primary is made its replica until it has
//! loaded that data, then promoted back. What the workers see afterwards is exactly
//! what they would see after failing over to the lagging replica.

use std::time::Duration;

use dlock_conformance::{FaultMode, FaultProxy, TestServer};
use tokio::time::sleep;

use crate::nemesis::{redis_bulk, redis_command, redis_info};

/// A key the nemesis writes to prove the data really went back.
const MARKER: &str = "dlock-faults:replica-marker";

/// A replica of one Redis server, fed through a fault proxy.
pub struct LaggingReplica {
    primary: String,
    proxy: FaultProxy,
    server: TestServer,
    dir: std::path::PathBuf,
}

impl LaggingReplica {
    /// Starts a replica of `primary` (`host:port`) and waits until it is in sync.
    pub async fn start(primary: &str) -> Option<Self> {
        let proxy = FaultProxy::start(primary).await.ok()?;
        let dir = std::env::temp_dir().join(format!(
            "dlock-faults-replica-{:016x}",
            dlock_any::random_u64()
        ));
        std::fs::create_dir_all(&dir).ok()?;
        let feed = proxy.addr();
        let (host, port) = (feed.ip().to_string(), feed.port().to_string());
        let files = dir.clone();
        // starting a process and polling its port blocks: keep it off the runtime
        // threads, which also serve the fenced store
        let server = tokio::task::spawn_blocking(move || {
            TestServer::redis(
                &files,
                &[
                    // when it is the primary's master, send its data at once (the
                    // default waits 5 s for more replicas to share the transfer)
                    "--repl-diskless-sync-delay",
                    "0",
                    "--replicaof",
                    &host,
                    &port,
                ],
            )
        })
        .await
        .ok()?;
        let replica = Self {
            primary: primary.to_owned(),
            proxy,
            server,
            dir,
        };
        let marked = redis_command(primary, &["SET", MARKER, "before"]).await;
        (marked && replica.linked(&replica.addr()).await && replica.has_marker("before").await)
            .then_some(replica)
    }

    /// Whether the replica's copy of the marker reads `value` (replication is
    /// asynchronous: it may take a moment).
    async fn has_marker(&self, value: &str) -> bool {
        for _ in 0..100 {
            if redis_bulk(&self.addr(), &["GET", MARKER]).await.as_deref() == Some(value) {
                return true;
            }
            sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.server.port)
    }

    /// Waits until the server at `host` reports its link to its master up and in sync.
    async fn linked(&self, host: &str) -> bool {
        for _ in 0..200 {
            if let Some(info) = redis_info(host, "replication").await
                && info.contains("master_link_status:up")
                && !info.contains("master_sync_in_progress:1")
            {
                return true;
            }
            sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Stops replication: from now on the replica falls behind.
    pub async fn cut(&self) -> bool {
        self.proxy.set_mode(FaultMode::Blackhole);
        redis_command(&self.primary, &["SET", MARKER, "after"]).await
    }

    /// Promotes the replica and gives its data to the primary (which is a replica of
    /// it until it has loaded it, answering writes with `READONLY` meanwhile); `true`
    /// when the primary's data did go back (a marker written after the cut is gone).
    pub async fn promote(&self) -> bool {
        let replica = self.addr();
        let (ip, port) = ("127.0.0.1", self.server.port.to_string());
        let promoted = redis_command(&replica, &["REPLICAOF", "NO", "ONE"]).await;
        let followed = redis_command(&self.primary, &["REPLICAOF", ip, &port]).await;
        let loaded = self.linked(&self.primary).await;
        let back = redis_command(&self.primary, &["REPLICAOF", "NO", "ONE"]).await;
        // the primary must now hold the replica's older data
        let reverted =
            redis_bulk(&self.primary, &["GET", MARKER]).await.as_deref() == Some("before");
        promoted && followed && loaded && back && reverted
    }
}

impl Drop for LaggingReplica {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
