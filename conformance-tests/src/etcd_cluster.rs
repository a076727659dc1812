//! A private 3-member etcd cluster whose members reach each other only through
//! [`SenderFilterProxy`]s, so one member can be cut off from its peers while its
//! clients still reach it. etcd derives member ids from the advertised peer URLs, which
//! every member must agree on, so the cut cannot be a proxy per direction as for
//! ZooKeeper: the member's own inbound proxy refuses everything, and the others' refuse
//! the connections it opens (its requests carry `X-Server-From: <its id>`).

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{SenderFilterProxy, TestServer, free_port};

/// The cluster; its members are killed when it is dropped.
pub struct PartitionableEtcd {
    _members: Vec<TestServer>,
    proxies: Vec<SenderFilterProxy>,
    ids: Vec<String>,
    /// Each member's client address (`127.0.0.1:port`).
    pub client_addrs: Vec<String>,
}

impl PartitionableEtcd {
    /// Starts 3 members in `dir` (heartbeat 50 ms, election timeout 500 ms) and waits
    /// until they have a leader.
    ///
    /// # Panics
    /// When etcd is missing (`scripts/services` installs it) or no leader is elected
    /// within 30 s.
    pub async fn start(dir: &std::path::Path) -> Self {
        let n = 3;
        let ports: Vec<[u16; 2]> = (0..n).map(|_| [free_port(), free_port()]).collect();
        let mut proxies = Vec::new();
        for p in &ports {
            proxies.push(
                SenderFilterProxy::start(&format!("127.0.0.1:{}", p[1]))
                    .await
                    .expect("bind a loopback port"),
            );
        }
        let cluster: Vec<String> = proxies
            .iter()
            .enumerate()
            .map(|(i, p)| format!("m{}=http://{}", i + 1, p.addr()))
            .collect();
        let cluster = cluster.join(",");
        let token = format!("dlock-partition-{}", free_port());
        let mut members = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let client = format!("http://127.0.0.1:{}", p[0]);
            let args: Vec<String> = [
                "--name".to_owned(),
                format!("m{}", i + 1),
                "--data-dir".to_owned(),
                dir.join(format!("m{}", i + 1)).display().to_string(),
                "--unsafe-no-fsync".to_owned(),
                "--heartbeat-interval=50".to_owned(),
                "--election-timeout=500".to_owned(),
                "--listen-client-urls".to_owned(),
                client.clone(),
                "--advertise-client-urls".to_owned(),
                client,
                "--listen-peer-urls".to_owned(),
                format!("http://127.0.0.1:{}", p[1]),
                "--initial-advertise-peer-urls".to_owned(),
                format!("http://{}", proxies[i].addr()),
                "--initial-cluster".to_owned(),
                cluster.clone(),
                "--initial-cluster-state".to_owned(),
                "new".to_owned(),
                "--initial-cluster-token".to_owned(),
                token.clone(),
            ]
            .to_vec();
            members.push(TestServer::start_on("etcd", &args, p[0]));
        }
        let client_addrs: Vec<String> = ports
            .iter()
            .map(|p| format!("127.0.0.1:{}", p[0]))
            .collect();
        let end = Instant::now() + Duration::from_secs(30);
        let ids = loop {
            let mut ids = Vec::new();
            let mut leaders = Vec::new();
            for a in &client_addrs {
                if let Some((id, leader)) = etcd_status(a).await {
                    ids.push(id);
                    leaders.push(leader);
                }
            }
            if ids.len() == n && leaders.iter().all(|l| l != "0" && *l == leaders[0]) {
                break ids;
            }
            assert!(Instant::now() < end, "the etcd cluster elected no leader");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Self {
            _members: members,
            proxies,
            ids,
            client_addrs,
        }
    }

    /// The index of the leader, as the members that answer see it.
    pub async fn leader(&self) -> Option<usize> {
        for a in &self.client_addrs {
            if let Some((_, leader)) = etcd_status(a).await
                && let Some(i) = self.ids.iter().position(|id| *id == leader)
            {
                return Some(i);
            }
        }
        None
    }

    /// Cuts member `i` off from its peers; its clients still reach it.
    pub fn partition(&self, i: usize) {
        let from = format!("X-Server-From: {}", hex_id(&self.ids[i]));
        for (j, p) in self.proxies.iter().enumerate() {
            if j == i {
                p.block(b"");
            } else {
                p.block(from.as_bytes());
            }
        }
    }

    /// Lets every member talk to every other again.
    pub fn heal(&self) {
        for p in &self.proxies {
            p.unblock_all();
        }
    }
}

/// etcd's member ids are decimal in JSON and hex in its peer headers.
fn hex_id(decimal: &str) -> String {
    decimal
        .parse::<u64>()
        .map_or_else(|_| decimal.to_owned(), |v| format!("{v:x}"))
}

/// `(member_id, leader)` of the member at `host` (`host:port`), from etcd's JSON
/// gateway (`/v3/maintenance/status`), as decimal strings.
pub async fn etcd_status(host: &str) -> Option<(String, String)> {
    let body = http_post(host, "/v3/maintenance/status", "{}").await?;
    Some((
        json_field(&body, "member_id")?,
        json_field(&body, "leader")?,
    ))
}

async fn http_post(host: &str, path: &str, body: &str) -> Option<String> {
    let connect = tokio::net::TcpStream::connect(host);
    let mut s = tokio::time::timeout(Duration::from_secs(2), connect)
        .await
        .ok()?
        .ok()?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(3), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    Some(out)
}

/// The value of `"field":"123"` in a JSON text (etcd quotes 64-bit numbers).
fn json_field(json: &str, field: &str) -> Option<String> {
    let at = json.find(&format!("\"{field}\":"))? + field.len() + 3;
    let rest = json[at..].trim_start().trim_start_matches('"');
    let v: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!v.is_empty()).then_some(v)
}
