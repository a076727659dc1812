//! A private 3-server ZooKeeper ensemble whose servers talk to each other only through
//! fault proxies, one per direction and port, so one server can be cut off from its
//! peers while its clients still reach it: the *server partition* (a follower that
//! keeps answering reads from a copy that no longer moves).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{FaultMode, FaultProxy, TestServer, free_port};

/// ZooKeeper's classpath as Debian's `zookeeper` package installs it (the same as
/// `scripts/services` uses).
const ZK_CLASSPATH: &str =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar";

/// The JVM flags `scripts/services` gives its servers for TTL nodes (tickets live in
/// them) and a container manager that looks every second (a ticket's node is deleted
/// within a second of its TTL).
const TTL_NODES: [&str; 2] = [
    "-Dzookeeper.extendedTypesEnabled=true",
    "-Dznode.container.checkIntervalMs=1000",
];

/// The command line of a server run with `cfg`, with `flags` for the JVM.
fn java_args(cfg: &std::path::Path, flags: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "-Xms16m",
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-Dlog4j.configuration=file:/dev/null",
    ]
    .iter()
    .chain(flags)
    .map(|s| (*s).to_owned())
    .collect();
    args.extend([
        "-cp".to_owned(),
        ZK_CLASSPATH.to_owned(),
        "org.apache.zookeeper.server.quorum.QuorumPeerMain".to_owned(),
        cfg.display().to_string(),
    ]);
    args
}

/// A private standalone server in `dir` started with only the `flags` given for the
/// JVM (none: ZooKeeper's defaults, without TTL nodes); returns it (killed when
/// dropped) and its address, once it serves.
///
/// # Panics
/// When Java or ZooKeeper is missing, or the server does not listen within 20 s.
pub fn standalone_zk(dir: &std::path::Path, flags: &[&str]) -> (TestServer, String) {
    zk_with_limits(
        dir,
        "tickTime=200\nminSessionTimeout=400\nmaxSessionTimeout=60000\n",
        flags,
    )
}

/// As [`standalone_zk`], with ZooKeeper's own session limits (`tickTime` 2000 ms:
/// sessions of 4 s to 40 s), as a server installed without tuning has them.
///
/// # Panics
/// As [`standalone_zk`].
pub fn stock_zk(dir: &std::path::Path, flags: &[&str]) -> (TestServer, String) {
    zk_with_limits(dir, "tickTime=2000\n", flags)
}

fn zk_with_limits(dir: &std::path::Path, limits: &str, flags: &[&str]) -> (TestServer, String) {
    let port = free_port();
    std::fs::create_dir_all(dir.join("data")).expect("server directory");
    let cfg = format!(
        "{limits}dataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
         admin.enableServer=false\n4lw.commands.whitelist=*\n",
        dir.join("data").display()
    );
    std::fs::write(dir.join("zoo.cfg"), cfg).expect("zoo.cfg");
    let server = TestServer::start_on("java", &java_args(&dir.join("zoo.cfg"), flags), port);
    (server, format!("127.0.0.1:{port}"))
}

/// How a [`PartitionableEnsemble`]'s servers run, beyond `scripts/services`' own
/// settings.
#[derive(Clone, Debug, Default)]
pub struct EnsembleOptions {
    /// In ticks (200 ms): how long a follower keeps serving after it last heard from
    /// the leader (0: 15 ticks).
    pub sync_limit: u32,
    /// Added to every server's environment (a faked clock's preload, say).
    pub env: Vec<(String, String)>,
    /// JVM flags after the TTL-node ones (`-Dznode.container.maxPerMinute=60`, say).
    pub flags: Vec<String>,
}

/// One server's proxies towards one peer (quorum and election ports).
struct PeerLink {
    from: usize,
    to: usize,
    proxies: [Arc<FaultProxy>; 2],
}

/// The ensemble; its servers are killed when it is dropped.
pub struct PartitionableEnsemble {
    servers: Vec<TestServer>,
    links: Vec<PeerLink>,
    /// Each server's client address (`127.0.0.1:port`).
    pub client_addrs: Vec<String>,
}

impl PartitionableEnsemble {
    /// Starts 3 servers in `dir` with `tickTime` 200 ms and the given `sync_limit` (in
    /// ticks: how long a follower keeps serving after it last heard from the leader),
    /// and waits until they form a quorum.
    ///
    /// # Panics
    /// When Java or ZooKeeper is missing (`scripts/services` installs them) or the
    /// ensemble does not form in three attempts of 40 s.
    pub async fn start(dir: &std::path::Path, sync_limit: u32) -> Self {
        let options = EnsembleOptions {
            sync_limit,
            ..EnsembleOptions::default()
        };
        Self::start_with(dir, &options).await
    }

    /// As [`PartitionableEnsemble::start`], the servers run as `options` say.
    ///
    /// # Panics
    /// As [`PartitionableEnsemble::start`].
    pub async fn start_with(dir: &std::path::Path, options: &EnsembleOptions) -> Self {
        // A port picked free can be taken by someone else before the JVM binds it
        // (seen once in CI as an ensemble that never formed): start over on new ports.
        for attempt in 1..=3 {
            let dir = dir.join(format!("attempt-{attempt}"));
            if let Some(e) = Self::try_start(&dir, options).await {
                return e;
            }
            eprintln!("the ensemble did not form (attempt {attempt}); starting over on new ports");
        }
        panic!("the ensemble did not form in three attempts");
    }

    async fn try_start(dir: &std::path::Path, options: &EnsembleOptions) -> Option<Self> {
        let n = 3;
        let sync_limit = if options.sync_limit == 0 {
            15
        } else {
            options.sync_limit
        };
        let ports: Vec<[u16; 3]> = (0..n)
            .map(|_| [free_port(), free_port(), free_port()])
            .collect();
        let mut links = Vec::new();
        for from in 0..n {
            for to in (0..n).filter(|t| *t != from) {
                let q = FaultProxy::start(&format!("127.0.0.1:{}", ports[to][1]))
                    .await
                    .expect("bind a loopback port");
                let e = FaultProxy::start(&format!("127.0.0.1:{}", ports[to][2]))
                    .await
                    .expect("bind a loopback port");
                links.push(PeerLink {
                    from,
                    to,
                    proxies: [Arc::new(q), Arc::new(e)],
                });
            }
        }
        let mut servers = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let d = dir.join(format!("zk{}", i + 1));
            std::fs::create_dir_all(d.join("data")).expect("ensemble directory");
            std::fs::write(d.join("data/myid"), format!("{}\n", i + 1)).expect("myid");
            let mut cfg = format!(
                "tickTime=200\ninitLimit=30\nsyncLimit={sync_limit}\nminSessionTimeout=400\n\
                 maxSessionTimeout=60000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
                d.join("data").display(),
                p[0]
            );
            for (j, q) in ports.iter().enumerate() {
                // a server's own line is where it listens; the others are reached
                // through the proxies of this direction
                let (quorum, election) = if i == j {
                    (format!("127.0.0.1:{}", q[1]), format!("{}", q[2]))
                } else {
                    let l = links
                        .iter()
                        .find(|l| l.from == i && l.to == j)
                        .expect("a link per direction");
                    (
                        l.proxies[0].addr().to_string(),
                        l.proxies[1].addr().port().to_string(),
                    )
                };
                cfg.push_str(&format!("server.{}={quorum}:{election}\n", j + 1));
            }
            std::fs::write(d.join("zoo.cfg"), cfg).expect("zoo.cfg");
            let flags: Vec<&str> = TTL_NODES
                .iter()
                .copied()
                .chain(options.flags.iter().map(String::as_str))
                .collect();
            let args = java_args(&d.join("zoo.cfg"), &flags);
            servers.push(TestServer::start_on_with("java", &args, p[0], &options.env));
        }
        let me = Self {
            servers,
            links,
            client_addrs: ports
                .iter()
                .map(|p| format!("127.0.0.1:{}", p[0]))
                .collect(),
        };
        let end = Instant::now() + Duration::from_secs(40);
        while me.leader().await.is_none() || me.modes().await.iter().any(Option::is_none) {
            if Instant::now() >= end {
                return None; // dropping the servers stops them
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Some(me)
    }

    /// Each server's mode (`leader`, `follower`), or `None` while it serves no clients.
    pub async fn modes(&self) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for a in &self.client_addrs {
            out.push(mode(a).await);
        }
        out
    }

    /// The index of the leader, if there is one.
    pub async fn leader(&self) -> Option<usize> {
        self.modes()
            .await
            .iter()
            .position(|m| m.as_deref() == Some("leader"))
    }

    /// Kills server `i` (SIGKILL): if it led, the others elect a new leader.
    pub fn kill(&mut self, i: usize) {
        if let Some(s) = self.servers.get_mut(i) {
            s.kill();
        }
    }

    /// Cuts server `i` off from its peers (both directions, open connections held
    /// silent as in a real partition); its clients still reach it.
    pub fn partition(&self, i: usize) {
        self.set(i, FaultMode::Blackhole);
    }

    /// Lets server `i` talk to its peers again.
    pub fn heal(&self, i: usize) {
        self.set(i, FaultMode::Pass);
    }

    fn set(&self, i: usize, mode: FaultMode) {
        for l in self.links.iter().filter(|l| l.from == i || l.to == i) {
            for p in &l.proxies {
                p.set_mode(mode);
            }
        }
    }

    /// How many servers run (for `Debug`-free reporting).
    #[must_use]
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Never true: an ensemble has servers.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// The `Mode:` line of ZooKeeper's `srvr` four-letter command.
async fn mode(addr: &str) -> Option<String> {
    let mut s = tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    s.write_all(b"srvr").await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::to_owned)
}
