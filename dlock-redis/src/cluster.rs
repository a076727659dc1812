//! Redis Cluster: `redis-cluster://[user:password@]h1:6379,h2:6379[?query]`.
//!
//! A lock's keys and its release channel share one hash tag (see `crate::keys`), so
//! every script touches one slot and runs on the slot's master; the redis crate's
//! cluster client routes it there and follows `MOVED` and `ASK` (slot migrations,
//! failovers). Renewals due together are grouped per slot, one script call per slot
//! (`crate::renewals`), and releases wake waiters with sharded pub/sub
//! (`SPUBLISH`/`SSUBSCRIBE`), so the message goes to the lock's shard only.

use std::time::Duration;

use dlock_core::{LockError, redact_url};
use redis::cluster::ClusterClient;
use redis::{ProtocolVersion, PushInfo};
use tokio::sync::mpsc::UnboundedSender;

use crate::conn::Conn;
use crate::errors::from_redis;

/// The scheme of a cluster URL.
pub(crate) const SCHEME: &str = "redis-cluster://";

/// Whether `url` names a Redis Cluster.
pub(crate) fn is_cluster_url(url: &str) -> bool {
    url.get(..SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(SCHEME))
}

/// One `redis://` URL per seed node of a `redis-cluster://` URL.
fn seed_urls(url: &str) -> Result<Vec<String>, LockError> {
    let shown = redact_url(url);
    let (userinfo, hosts, tail) = crate::url::split_hosts(url);
    if !(tail.is_empty() || tail == "/" || tail.starts_with('?') || tail.starts_with("/?")) {
        return Err(LockError::Config(format!(
            "{shown:?}: a cluster has one database, 0; use redis-cluster://h1:6379,h2:6379"
        )));
    }
    if hosts.is_empty() {
        return Err(LockError::Config(format!(
            "{shown:?} names no nodes: use redis-cluster://h1:6379,h2:6379"
        )));
    }
    let query = tail.trim_start_matches('/');
    Ok(hosts
        .iter()
        .map(|h| format!("redis://{userinfo}{h}{query}"))
        .collect())
}

/// The shortest pause, in milliseconds, before redis-rs retries a command that met a
/// moved slot or a lost node.
const RETRY_WAIT_MIN_MS: u64 = 25;
/// The longest such pause, in milliseconds.
const RETRY_WAIT_MAX_MS: u64 = 250;

/// Connects to the cluster `url` names (dlock's own parameters already taken off);
/// release messages arrive on `pushes`.
pub(crate) async fn connect(
    url: &str,
    timeout: Duration,
    pushes: UnboundedSender<PushInfo>,
) -> Result<Conn, LockError> {
    let shown = redact_url(url);
    let seeds = seed_urls(url)?;
    let builder = || {
        ClusterClient::builder(seeds.clone())
            .use_protocol(ProtocolVersion::RESP3)
            .connection_timeout(timeout)
            .response_timeout(timeout)
            // redis-rs waits at least 1.28 s before it retries a command a failover
            // interrupted; a lock waits on that retry (a release, a resubscription),
            // so it comes within a quarter second
            .min_retry_wait(RETRY_WAIT_MIN_MS)
            .max_retry_wait(RETRY_WAIT_MAX_MS)
            .retry_wait_formula(RETRY_WAIT_MIN_MS, 2)
    };
    let bad = |e: redis::RedisError| LockError::Config(format!("cannot use {shown:?}: {e}"));
    // commands and subscriptions on connections of their own (see `Conn::Cluster`)
    let data = builder().build().map_err(bad)?;
    let subs = builder().push_sender(pushes).build().map_err(bad)?;
    let what = format!("connecting to {shown}");
    let (data, subs) = dlock_core::backend::within(timeout * 3, &what, async {
        let data = data.get_async_connection().await;
        let subs = subs.get_async_connection().await;
        Ok((
            data.map_err(|e| from_redis(&what, e))?,
            subs.map_err(|e| from_redis(&what, e))?,
        ))
    })
    .await?;
    Ok(Conn::Cluster { data, subs })
}

/// The masters' `(host, port)`s, as `CLUSTER SLOTS` names them (within `timeout`).
pub(crate) async fn masters(
    conn: &redis::cluster_async::ClusterConnection,
    timeout: Duration,
) -> redis::RedisResult<Vec<(String, u16)>> {
    use redis::Value;
    let mut c = conn.clone();
    let slots: Vec<Value> = page(
        timeout,
        redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut c),
    )
    .await?;
    let mut masters = std::collections::BTreeSet::new();
    for range in &slots {
        // [start, end, [host, port, id, …], replicas…]
        if let Value::Array(parts) = range
            && let Some(Value::Array(master)) = parts.get(2)
            && let (Some(host), Some(port)) = (master.first(), master.get(1))
        {
            let host: String = redis::from_redis_value(host.clone())?;
            let port: u16 = redis::from_redis_value(port.clone())?;
            masters.insert((host, port));
        }
    }
    Ok(masters.into_iter().collect())
}

/// Every key matching `pattern` on every master (`CLUSTER SLOTS` names them; `SCAN`
/// each, a page at a time, each page within `timeout`).
pub(crate) async fn scan(
    conn: &redis::cluster_async::ClusterConnection,
    pattern: &str,
    timeout: Duration,
) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    for (host, port) in masters(conn, timeout).await? {
        let mut at = Routed::new(conn.clone(), host, port);
        let mut cursor = 0_u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000);
            let (next, page): (u64, Vec<String>) = page(timeout, scan.query_async(&mut at)).await?;
            keys.extend(page);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(keys)
}

/// The cluster connection with every command sent to one node (by address), for
/// commands about a server rather than a key (`INFO`, `TIME`, `CONFIG GET`, `SCAN`):
/// the cluster client's own connections, credentials and timeouts.
pub(crate) struct Routed {
    data: redis::cluster_async::ClusterConnection,
    host: String,
    port: u16,
}

impl Routed {
    pub(crate) fn new(
        data: redis::cluster_async::ClusterConnection,
        host: String,
        port: u16,
    ) -> Self {
        Self { data, host, port }
    }

    /// `host:port`, for findings.
    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn route(&self) -> redis::cluster_routing::SingleNodeRoutingInfo {
        redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        }
    }
}

impl redis::aio::ConnectionLike for Routed {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let at = redis::cluster_routing::RoutingInfo::SingleNode(self.route());
            self.data.route_command(cmd.clone(), at).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let at = self.route();
            self.data
                .route_pipeline(cmd.clone(), offset, count, at)
                .await
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// `f` within `timeout`, a timeout as an I/O error.
async fn page<T>(
    timeout: Duration,
    f: impl Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(timeout, f).await.unwrap_or_else(|_| {
        Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "a SCAN page timed out").into())
    })
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag — the part between the
/// first `{` and the next `}` when that is not empty — or of the whole key, mod 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let close = rest.iter().position(|b| *b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag_as_redis_computes_them() {
        // values from `CLUSTER KEYSLOT`
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"dlock:{orders/42}:lock"), slot(b"orders/42"));
        assert_eq!(slot(b"{}x"), slot(b"{}x"));
        assert_eq!(slot(b"a{}b"), crc16(b"a{}b") % 16384);
    }

    #[test]
    fn cluster_urls_name_seed_nodes() {
        assert_eq!(
            seed_urls("redis-cluster://:pw@a:1,b:2?protocol=resp3").unwrap(),
            [
                "redis://:pw@a:1?protocol=resp3",
                "redis://:pw@b:2?protocol=resp3"
            ]
        );
        assert_eq!(seed_urls("redis-cluster://a:1/").unwrap(), ["redis://a:1"]);
        for bad in ["redis-cluster://", "redis-cluster://a:1/3"] {
            assert!(matches!(seed_urls(bad), Err(LockError::Config(_))), "{bad}");
        }
        assert!(is_cluster_url("Redis-Cluster://a:1"));
    }
}
