//! What decides whether locking on the ensemble is safe: each server's version and
//! mode (four-letter words `srvr` and `conf`), the session timeout it granted, and
//! what tickets need (TTL nodes, and how soon an expired one goes).

use std::time::Duration;

use dlock_core::{Finding, LockError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;

/// Sends four-letter word `word` to `host` and returns the answer.
async fn four_letter(host: &str, word: &str) -> Option<String> {
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(host).await.ok()?;
        s.write_all(word.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(3), ask)
        .await
        .ok()?
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches([':', '=', ' ']).trim())
}

/// The findings on the servers in `hosts` (`h:p,h:p`), for a session that asked for
/// `asked` and was granted `granted`.
pub(crate) async fn diagnose(
    hosts: &str,
    asked: Duration,
    granted: Duration,
) -> Result<Vec<Finding>, LockError> {
    let mut found = Vec::new();
    // servers that answered, and those of them serving (a follower or an observer
    // serves only inside a quorum)
    let (mut answered, mut serving) = (0, 0);
    let mut bounds = None;
    for host in hosts.split(',').map(str::trim) {
        let Some(srvr) = four_letter(host, "srvr").await else {
            found.push(Finding::warning(
                format!("{host}: reachable"),
                "no answer to srvr",
                "a server down costs the ensemble its margin: it holds with a majority",
            ));
            continue;
        };
        answered += 1;
        if srvr.contains("not in the whitelist") {
            serving += 1; // it answers, so it runs; its mode is not ours to see
            found.push(Finding::info(
                format!("{host}: four-letter words"),
                "srvr and conf are not allowed (4lw.commands.whitelist)",
            ));
            continue;
        }
        let version = field(&srvr, "Zookeeper version").unwrap_or("?");
        let version = version.split(['-', ',']).next().unwrap_or(version);
        let mode = field(&srvr, "Mode").unwrap_or("?");
        serving += usize::from(matches!(
            mode,
            "leader" | "follower" | "observer" | "standalone" | "read-only"
        ));
        found.push(Finding::info(
            format!("{host}: server"),
            format!("ZooKeeper {version}, {mode}"),
        ));
        if bounds.is_none()
            && let Some(conf) = four_letter(host, "conf").await
            && let (Some(min), Some(max)) = (
                field(&conf, "minSessionTimeout").and_then(|v| v.parse::<u64>().ok()),
                field(&conf, "maxSessionTimeout").and_then(|v| v.parse::<u64>().ok()),
            )
        {
            bounds = Some((Duration::from_millis(min), Duration::from_millis(max)));
        }
    }
    if answered > 0 && serving == 0 {
        found.push(Finding::critical(
            "quorum",
            "no server that answered is serving requests",
            "the ensemble has no quorum: nothing can be locked until a majority is back",
        ));
    }
    if let Some((min, max)) = bounds {
        found.push(Finding::info(
            "session timeout bounds",
            format!("{} … {} ms", min.as_millis(), max.as_millis()),
        ));
    }
    let granted_text = format!(
        "asked {} ms, granted {} ms",
        asked.as_millis(),
        granted.as_millis()
    );
    found.push(if granted == asked {
        Finding::info("session timeout", granted_text)
    } else {
        Finding::warning(
            "session timeout",
            granted_text,
            "the server clamps session timeouts to its bounds: a crashed holder's lock \
             outlives it by the granted timeout, and leases last that long",
        )
    });
    Ok(found)
}

impl ZkLock {
    /// What `dlock doctor` says of tickets here: whether the servers keep TTL nodes,
    /// and how soon their container manager deletes an expired one — a ticket's lock
    /// outlives a taker that stopped renewing by its TTL plus that (servers keep the
    /// interval, `znode.container.checkIntervalMs`, to themselves: a node of 1 ms is
    /// watched for a few seconds).
    pub(crate) async fn ticket_findings(&self, client: &zk::Client) -> Vec<dlock_core::Finding> {
        const CHECK: &str = "tickets (TTL nodes)";
        const LOOK: Duration = Duration::from_secs(3);
        match self.check_ttl_nodes(client).await {
            Ok(()) => {}
            Err(LockError::Unsupported { .. }) => {
                return vec![Finding::warning(
                    CHECK,
                    "off (zookeeper.extendedTypesEnabled is not set)",
                    "dlock acquire cannot hand a lock over here: set \
                     -Dzookeeper.extendedTypesEnabled=true on every server",
                )];
            }
            Err(e) => {
                return vec![Finding::warning(
                    CHECK,
                    format!("not checked: {e}"),
                    "tickets may not work here",
                )];
            }
        }
        let path = format!("{}/ttl-expiry-{:016x}", self.root, dlock_core::random_u64());
        let mode = zk::CreateMode::Persistent
            .with_acls(self.acls())
            .with_ttl(Duration::from_millis(1));
        let made = Instant::now();
        let created = self.op("check TTL expiry", client.create(&path, b"", &mode));
        if created.await.is_err() {
            return vec![Finding::info(CHECK, "on")];
        }
        let watched = self
            .op("check TTL expiry", client.check_and_watch_stat(&path))
            .await;
        let gone = match watched {
            Ok((None, _)) => true,
            Ok((Some(_), watcher)) => tokio::time::timeout(LOOK, watcher.changed()).await.is_ok(),
            Err(_) => false,
        };
        if gone {
            return vec![Finding::info(
                CHECK,
                format!(
                    "on; an expired TTL node went after {} ms (a ticket's lock outlives a \
                     taker that stopped by its TTL plus about that)",
                    made.elapsed().as_millis()
                ),
            )];
        }
        let _ = self
            .op("check TTL expiry", client.delete(&path, None))
            .await;
        vec![Finding::warning(
            CHECK,
            format!(
                "on; an expired TTL node was still there after {} s",
                LOOK.as_secs()
            ),
            "the container manager looks every znode.container.checkIntervalMs (60 s by \
             default): a ticket's lock outlives a taker that stopped renewing by its TTL \
             plus up to that; -Dznode.container.checkIntervalMs=1000 on every server \
             shortens it",
        )]
    }
}
