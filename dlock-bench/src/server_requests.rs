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
    let (scheme, _) = super::floor::scheme_and_base(url);
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
        #[cfg(feature = "redis")]
        "redlock" => Some(Box::new(RedisCommands(
            hosts.iter().map(|h| format!("redis://{h}")).collect(),
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
async fn exchange(host: &str, request: &[u8]) -> Option<String> {
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
