//! `dlock doctor` on Redis: what decides whether locking on a server is safe.

use dlock_core::{Finding, LockError, clock_offset, now_ms};

use crate::conn::Conn;
use crate::node::Node;

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
        found.push(Finding::info(
            "server version",
            format!("Redis {}", field("redis_version").unwrap_or("?")),
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
