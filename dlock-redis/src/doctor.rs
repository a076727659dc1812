//! `dlock doctor` on Redis: what decides whether locking on a server is safe.

use std::time::Duration;

use dlock_core::{
    CLOCK_OFFSET_CRITICAL, CLOCK_OFFSET_WARNING, Finding, LockError, clock_offset, format_duration,
    now_ms,
};

use crate::conn::Conn;
use crate::node::Node;

/// Redlock's findings: each node's (named `node N: …`), whether it still rests after a
/// restart (see [`crate::DEFAULT_RESTART_DELAY`]), and how far apart the nodes' clocks
/// are. A node that does not answer is a warning, not an error: the quorum has a margin.
pub(crate) async fn redlock(
    nodes: &[std::sync::Arc<Node>],
    restart_delay: Duration,
) -> Vec<Finding> {
    let mut found = vec![restart_delay_finding(restart_delay)];
    let mut offsets = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let what = format!("node {}", i + 1);
        let each = match node.diagnose().await {
            Ok(each) => each,
            Err(e) => {
                found.push(unanswered(&e, restart_delay).about(&what));
                continue;
            }
        };
        for f in each {
            if f.check == "server clock offset" {
                offsets.push(
                    f.found
                        .split(' ')
                        .next()
                        .and_then(|o| o.parse::<i64>().ok()),
                );
            }
            if f.check == "uptime" {
                let up = f
                    .found
                    .split(' ')
                    .next()
                    .and_then(|s| s.parse::<u64>().ok());
                if let Some(resting) = resting(up, restart_delay) {
                    found.push(resting.about(&what));
                }
            }
            found.push(f.about(&what));
        }
    }
    let offsets: Vec<i64> = offsets.into_iter().flatten().collect();
    if let (Some(lo), Some(hi)) = (offsets.iter().min(), offsets.iter().max()) {
        let spread = Duration::from_millis((hi - lo).unsigned_abs());
        let found_text = format!("{} ms between the nodes' clocks", hi - lo);
        let advice = "keep the nodes' clocks synchronised (NTP/chrony): Redlock's validity \
                      assumes their clocks run together, and a node far off will be stepped";
        found.push(if spread > CLOCK_OFFSET_CRITICAL {
            Finding::critical("clock spread", found_text, advice)
        } else if spread > CLOCK_OFFSET_WARNING {
            Finding::warning("clock spread", found_text, advice)
        } else {
            Finding::info("clock spread", found_text)
        });
    }
    found
}

/// The restart delay in use: off is safe only when no node loses its data.
fn restart_delay_finding(delay: Duration) -> Finding {
    if delay.is_zero() {
        return Finding::warning(
            "restart delay",
            "off (restart-delay=0s)",
            "a node restarted without its data can at once grant a name it granted before: \
             keep it off only if every node runs with appendfsync always",
        );
    }
    Finding::info(
        "restart delay",
        format!(
            "{}: a restarted node grants nothing that long",
            format_duration(delay)
        ),
    )
}

/// A node up for less than the restart delay: it grants nothing yet.
fn resting(up_secs: Option<u64>, delay: Duration) -> Option<Finding> {
    let up = Duration::from_secs(up_secs?);
    let left = delay.checked_sub(up).filter(|l| !l.is_zero())?;
    Some(Finding::warning(
        "resting",
        format!(
            "up {} s, grants nothing for {} more (restart delay {})",
            up.as_secs(),
            format_duration(left),
            format_duration(delay)
        ),
        "it started recently: until then it counts as down for the quorum",
    ))
}

/// A node that did not answer `doctor`. Denied `INFO` with a restart delay on, it
/// grants nothing at all: critical.
fn unanswered(e: &LockError, delay: Duration) -> Finding {
    let text = e.to_string();
    if !delay.is_zero() && text.to_ascii_lowercase().contains("noperm") {
        return Finding::critical(
            "uptime",
            format!("unknown, so it grants nothing ({text})"),
            "the restart delay reads the node's uptime with INFO: allow it \
             (ACL SETUSER <user> +info), or set restart-delay=0s if every node keeps its data",
        );
    }
    Finding::warning(
        "reachable",
        text,
        "a node down costs the quorum its margin: Redlock holds with a majority",
    )
}

impl Node {
    /// What decides whether locking on this server is safe: its version, clock,
    /// eviction policy, persistence and replication role — on a cluster, of every
    /// master (each finding names it).
    pub(crate) async fn diagnose(&self) -> Result<Vec<Finding>, LockError> {
        let data = match &self.conn {
            Conn::Cluster { data, .. } => data,
            Conn::Server(_) => return self.diagnose_server(&mut self.conn.clone()).await,
        };
        let masters = self
            .run("cluster slots", crate::cluster::masters(data, self.timeout))
            .await?;
        let mut found = Vec::new();
        for (host, port) in masters {
            let mut master = crate::cluster::Routed::new(data.clone(), host, port);
            let addr = master.addr();
            let each = self.diagnose_server(&mut master).await?;
            found.extend(each.into_iter().map(|f| f.about(&addr)));
        }
        Ok(found)
    }

    /// [`Node::diagnose`] of the one server `conn` reaches.
    async fn diagnose_server<C>(&self, conn: &mut C) -> Result<Vec<Finding>, LockError>
    where
        C: redis::aio::ConnectionLike + Send,
    {
        let mut found = Vec::new();
        let info: String = self
            .run("info", redis::cmd("INFO").query_async(conn))
            .await?;
        let field = |key: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
        };
        // Valkey answers with the Redis version it is compatible with, and its own
        let version = match field("valkey_version") {
            Some(v) => format!(
                "Valkey {v} (Redis {} compatible)",
                field("redis_version").unwrap_or("?")
            ),
            None => format!("Redis {}", field("redis_version").unwrap_or("?")),
        };
        found.push(Finding::info("server version", version));
        found.push(Finding::info(
            "uptime",
            format!("{} s", field("uptime_in_seconds").unwrap_or("?")),
        ));
        let sent = now_ms();
        let (secs, micros): (i64, i64) = self
            .run("time", redis::cmd("TIME").query_async(conn))
            .await?;
        found.push(clock_offset(
            "server clock",
            secs * 1000 + micros / 1000,
            sent,
            now_ms(),
        ));
        match field("role") {
            Some("master") => {
                let replicas = field("connected_slaves").unwrap_or("0");
                found.push(Finding::info(
                    "replication",
                    format!("primary with {replicas} replica(s)"),
                ));
                if replicas != "0" {
                    found.push(Finding::warning(
                        "failover",
                        "replicas copy asynchronously",
                        "a failover to a replica that missed the last writes can grant a lock \
                         twice: pass the fencing token to the store you write to",
                    ));
                }
            }
            role => found.push(Finding::critical(
                "replication",
                format!("connected to a {}", role.unwrap_or("?")),
                "point dlock at the primary: a replica refuses the writes a lock needs",
            )),
        }
        let config: redis::RedisResult<std::collections::HashMap<String, String>> =
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory*")
                .arg("append*")
                .query_async(conn)
                .await;
        let Ok(config) = config else {
            found.push(Finding::warning(
                "configuration",
                "CONFIG GET is not allowed here",
                "check by hand that maxmemory-policy is noeviction and appendonly suits you",
            ));
            return Ok(found);
        };
        let get = |k: &str| config.get(k).map_or("?", String::as_str);
        let policy = get("maxmemory-policy");
        if get("maxmemory") == "0" || policy == "noeviction" {
            found.push(Finding::info(
                "eviction",
                format!("maxmemory {}, maxmemory-policy {policy}", get("maxmemory")),
            ));
        } else {
            found.push(Finding::critical(
                "eviction",
                format!("maxmemory {}, maxmemory-policy {policy}", get("maxmemory")),
                "set maxmemory-policy noeviction: under memory pressure Redis would evict lock \
                 keys, which carry a TTL (a lock held twice) — and under allkeys-* the fencing \
                 counters too (tokens fall back to the clock)",
            ));
        }
        match (get("appendonly"), get("appendfsync")) {
            ("yes", "always") => found.push(Finding::info(
                "persistence",
                "appendonly yes, appendfsync always",
            )),
            ("yes", fsync) => found.push(Finding::warning(
                "persistence",
                format!("appendonly yes, appendfsync {fsync}"),
                "a crash can lose the grants written since the last fsync (a second with \
                 everysec, longer with no): a restarted server may grant a lock twice (tokens \
                 stay above the old ones: the fence still holds)",
            )),
            (aof, _) => found.push(Finding::warning(
                "persistence",
                format!("appendonly {aof}"),
                "a restart forgets every lock: one may be granted twice after it (tokens \
                 stay above the old ones: the fence still holds); set appendonly yes",
            )),
        }
        Ok(found)
    }
}
