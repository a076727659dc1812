//! How many requests the server has received, read from the server's own statistics,
//! so the held scenario reports renewal traffic as the server saw it (batched requests
//! count once), not as calls into the trait.

use crate::scenarios::RequestCounter;
use dlock_any::async_trait;

/// A counter for the URL's backend, if the server reports one.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn for_url(url: &str) -> Option<Box<dyn RequestCounter>> {
    let (scheme, _) = crate::url_parts::scheme_and_base(url);
    let hosts = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', '?'])
        .next()
        .unwrap_or_default();
    let hosts = hosts.rsplit_once('@').map_or(hosts, |(_, h)| h);
    let hosts: Vec<String> = hosts.split(',').map(str::to_owned).collect();
    match scheme.as_str() {
        #[cfg(feature = "redis")]
        "redis" => Some(Box::new(RedisCommands(vec![url.to_owned()]))),
        // a cluster's seed nodes (its masters, as scripts/services lists them)
        #[cfg(feature = "redis")]
        "redlock" | "redis-cluster" => Some(Box::new(RedisCommands(
            hosts.iter().map(|h| format!("redis://{h}")).collect(),
        ))),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(Box::new(PgStatements(url.to_owned(), 0.into()))),
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => Some(Box::new(MySqlQuestions(
            url.replacen("mariadb:", "mysql:", 1),
            0.into(),
        ))),
        "etcd" => Some(Box::new(EtcdMessages(hosts.first()?.clone()))),
        "zk" | "zookeeper" => Some(Box::new(ZkPackets(hosts.first()?.clone()))),
        _ => None,
    }
}

/// Redis: script calls (`EVALSHA`, `EVAL`) from `INFO commandstats`, over every node.
/// Every dlock request is one script call; `total_commands_processed` would also count
/// the commands each script runs inside the server.
#[cfg(feature = "redis")]
struct RedisCommands(Vec<String>);

#[cfg(feature = "redis")]
#[async_trait]
impl RequestCounter for RedisCommands {
    fn describe(&self) -> &'static str {
        "script calls (EVALSHA + EVAL in INFO commandstats), all nodes"
    }
    async fn requests(&self) -> Option<u64> {
        let mut total = 0;
        for url in &self.0 {
            let client = redis::Client::open(url.as_str()).ok()?;
            let mut c = client.get_multiplexed_async_connection().await.ok()?;
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut c)
                .await
                .ok()?;
            total += info
                .lines()
                .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
                .filter_map(|l| {
                    l.split("calls=")
                        .nth(1)?
                        .split(',')
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .sum::<u64>();
        }
        Some(total)
    }
}

/// PostgreSQL: statements run, from `pg_stat_statements` (counted as each statement
/// ends; `pg_stat_database` lags by up to the backends' 10 s flush interval). Needs
/// `shared_preload_libraries = pg_stat_statements`, as `scripts/services` starts it;
/// the extension is created on first use. Reported net of the counter's own.
#[cfg(feature = "postgres")]
struct PgStatements(String, std::sync::atomic::AtomicU64);

#[cfg(feature = "postgres")]
#[async_trait]
impl RequestCounter for PgStatements {
    fn describe(&self) -> &'static str {
        "statements (pg_stat_statements calls), all databases"
    }
    async fn requests(&self) -> Option<u64> {
        use sqlx::Connection;
        let base = self.0.split('?').next().unwrap_or(&self.0);
        let mut c = sqlx::PgConnection::connect(base).await.ok()?;
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut c)
            .await
            .ok()?;
        let calls: Option<i64> =
            sqlx::query_scalar("SELECT sum(calls)::bigint FROM pg_stat_statements")
                .fetch_one(&mut c)
                .await
                .ok()?;
        let _ = c.close().await;
        // net of this counter's own statements: two per earlier read, and this read's
        // CREATE EXTENSION (its SELECT counts once it is done)
        let earlier = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        u64::try_from(calls.unwrap_or(0))
            .ok()
            .map(|c| c.saturating_sub(2 * earlier + 1))
    }
}

/// MySQL/MariaDB: statements clients sent (`Questions` in `SHOW GLOBAL STATUS`), net
/// of the counter's own.
#[cfg(feature = "mysql")]
struct MySqlQuestions(String, std::sync::atomic::AtomicU64);

#[cfg(feature = "mysql")]
#[async_trait]
impl RequestCounter for MySqlQuestions {
    fn describe(&self) -> &'static str {
        "statements (Questions in SHOW GLOBAL STATUS)"
    }
    async fn requests(&self) -> Option<u64> {
        use sqlx::Connection;
        let base = self.0.split('?').next().unwrap_or(&self.0);
        let mut c = sqlx::MySqlConnection::connect(base).await.ok()?;
        let (_, value): (String, String) = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Questions'")
            .fetch_one(&mut c)
            .await
            .ok()?;
        let _ = c.close().await;
        // net of this counter's own statements, this read's included: sqlx's connect
        // runs one (SET sql_mode, time_zone, NAMES), then the SHOW
        let earlier = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        value
            .parse::<u64>()
            .ok()
            .map(|q| q.saturating_sub(2 * (earlier + 1)))
    }
}

/// etcd: gRPC request messages received (keep-alives on a stream count one each), from
/// the member's Prometheus endpoint.
struct EtcdMessages(String);

#[async_trait]
impl RequestCounter for EtcdMessages {
    fn describe(&self) -> &'static str {
        "gRPC messages received (grpc_server_msg_received_total), first member"
    }
    async fn requests(&self) -> Option<u64> {
        let get = format!("GET /metrics HTTP/1.0\r\nHost: {}\r\n\r\n", self.0);
        let text = exchange(&self.0, get.as_bytes()).await?;
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        // whole counts, as Prometheus prints them
        Some(total as u64)
    }
}

/// ZooKeeper: packets received (`mntr`).
struct ZkPackets(String);

#[async_trait]
impl RequestCounter for ZkPackets {
    fn describe(&self) -> &'static str {
        "packets received (mntr zk_packets_received), first server"
    }
    async fn requests(&self) -> Option<u64> {
        let text = exchange(&self.0, b"mntr").await?;
        text.lines()
            .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
    }
}

/// Sends `request` on a new TCP connection and reads the answer to its end.
pub(crate) async fn exchange(host: &str, request: &[u8]) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limit = std::time::Duration::from_secs(5);
    let mut s = tokio::time::timeout(limit, tokio::net::TcpStream::connect(host))
        .await
        .ok()?
        .ok()?;
    s.write_all(request).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(limit, s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    Some(out)
}
