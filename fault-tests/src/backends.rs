//! The backends under test, their URLs from the test environment, and which faults
//! apply to each.

use std::sync::Arc;

use dlock_conformance::{PartitionableEnsemble, PartitionableEtcd};

use crate::nemesis::Nemesis;

/// A private cluster whose members can be cut off from their peers.
#[derive(Clone)]
pub enum Ensemble {
    /// ZooKeeper, 3 servers.
    ZooKeeper(Arc<PartitionableEnsemble>),
    /// etcd, 3 members.
    Etcd(Arc<PartitionableEtcd>),
}

impl std::fmt::Debug for Ensemble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Ensemble")
            .field(&self.client_addrs())
            .finish()
    }
}

impl Ensemble {
    /// Each member's client address.
    #[must_use]
    pub fn client_addrs(&self) -> &[String] {
        match self {
            Self::ZooKeeper(e) => &e.client_addrs,
            Self::Etcd(e) => &e.client_addrs,
        }
    }

    /// The index of the leader, if there is one.
    pub async fn leader(&self) -> Option<usize> {
        match self {
            Self::ZooKeeper(e) => e.leader().await,
            Self::Etcd(e) => e.leader().await,
        }
    }

    /// Cuts member `i` off from its peers.
    pub fn partition(&self, i: usize) {
        match self {
            Self::ZooKeeper(e) => e.partition(i),
            Self::Etcd(e) => e.partition(i),
        }
    }

    /// Heals member `i`'s peer links.
    pub fn heal(&self, i: usize) {
        match self {
            Self::ZooKeeper(e) => e.heal(i),
            Self::Etcd(e) => e.heal(),
        }
    }

    /// The lock URL for one member.
    fn url(&self, i: usize) -> String {
        let a = &self.client_addrs()[i % self.client_addrs().len()];
        match self {
            Self::ZooKeeper(_) => format!("zk://{a}?session_timeout=1s"),
            Self::Etcd(_) => format!("etcd://{a}"),
        }
    }
}

/// One backend configuration.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Short label for the report.
    pub label: &'static str,
    /// Lock URL (as `dlock_any::connect` takes it).
    pub url: String,
    /// `scripts/services` names of its servers (empty for SQLite).
    pub servers: Vec<&'static str>,
    /// Whether it is a cluster with a leader (etcd, ZooKeeper ensembles).
    pub has_leader: bool,
    /// Redis servers started with `DEBUG` allowed: data loss can be staged.
    pub redis: bool,
    /// A private ensemble: each worker talks to one server (worker `i` to server
    /// `i % 3`), and a server can be cut off from its peers.
    pub ensemble: Option<Ensemble>,
}

impl Backend {
    /// The faults that make sense here.
    #[must_use]
    pub fn nemeses(&self) -> Vec<Nemesis> {
        if self.ensemble.is_some() {
            return vec![Nemesis::KillHolder, Nemesis::ServerPartition];
        }
        if self.label == POSTGRES_PAIR {
            return vec![Nemesis::StandbyPromoted];
        }
        if self.label == REDIS_SENTINEL {
            return vec![Nemesis::SentinelFailover];
        }
        // the holder faults and a master's failover: the cluster's nodes are reached at
        // the addresses it hands out (no proxy covers them)
        if self.label == REDIS_CLUSTER {
            return vec![
                Nemesis::KillHolder,
                Nemesis::KillWaiter,
                Nemesis::PauseHolder,
                Nemesis::ClusterFailover,
            ];
        }
        // PgBouncer's own faults are PostgreSQL's
        if self.label == PGBOUNCER {
            return vec![Nemesis::KillHolder, Nemesis::PauseHolder];
        }
        let mut n = vec![
            Nemesis::KillHolder,
            Nemesis::KillWaiter,
            Nemesis::PauseHolder,
            Nemesis::RevokeHolder,
        ];
        if self.redis {
            n.push(Nemesis::DataLoss);
            if self.servers.len() == 1 {
                n.push(Nemesis::LaggingReplica);
            }
        }
        if !self.servers.is_empty() {
            n.push(Nemesis::Partition);
            n.push(Nemesis::Latency);
        }
        match (self.servers.len(), self.has_leader) {
            (0, _) => {}
            (1, _) => n.push(Nemesis::RestartServer),
            (_, true) => {
                n.push(Nemesis::KillMember);
                n.push(Nemesis::KillLeader);
            }
            (_, false) => n.push(Nemesis::KillMember),
        }
        if self.label == "redlock×5" {
            n.push(Nemesis::RedlockNodeForgets);
        }
        n
    }

    /// The clock faults that make sense here: the client's on every backend but the
    /// private ensembles (whose faults are their peer links); the server's where its
    /// clock can be faked and restarted through `scripts/services` (not etcd: Go reads
    /// the vDSO, past libfaketime; not SQLite, whose clock is its clients').
    #[must_use]
    pub fn clock_nemeses(&self) -> Vec<Nemesis> {
        if self.ensemble.is_some()
            || [POSTGRES_PAIR, REDIS_SENTINEL, REDIS_CLUSTER, PGBOUNCER].contains(&self.label)
        {
            return Vec::new();
        }
        Nemesis::CLOCKS
            .into_iter()
            .filter(|n| n.server_clock_step().is_none() || !self.clock_servers().is_empty())
            .collect()
    }

    /// The servers whose clocks the server clock faults step: the single server of
    /// Redis, PostgreSQL, MariaDB and ZooKeeper; 2 of Redlock's 5 nodes (a minority).
    #[must_use]
    pub fn clock_servers(&self) -> Vec<&'static str> {
        match self.label {
            "redis" | "postgres" | "mariadb" | "zookeeper" => self.servers.clone(),
            "redlock×5" => self.servers.iter().take(2).copied().collect(),
            _ => Vec::new(),
        }
    }

    /// Whether mutual exclusion must hold under `nemesis` here. A step of the clock that
    /// decides expiry ends leases early: the servers' clocks of Redis, Redlock (a
    /// holder with only a bare quorum loses it to the 2 stepped nodes), PostgreSQL and
    /// MariaDB; on SQLite the clients' clock, which is the database's. etcd's lessor
    /// and ZooKeeper's session timers run on monotonic clocks and must not care.
    #[must_use]
    pub fn exclusion_expected(&self, nemesis: Nemesis) -> bool {
        match nemesis {
            Nemesis::ServerClockAhead => {
                self.clock_servers().is_empty() || self.label == "zookeeper"
            }
            Nemesis::ClientClockAhead => self.label != "sqlite",
            n => n.exclusion_expected(),
        }
    }

    /// Whether workers can run `workload` here: Redlock has no semaphores, read-write
    /// locks or fence helpers; only the SQL databases and Redis keep idempotency
    /// results.
    #[must_use]
    pub fn runs(&self, workload: crate::Workload) -> bool {
        use crate::Workload;
        use crate::own_store::OwnStore;
        match workload {
            Workload::Mutex | Workload::Election => true,
            Workload::Semaphore(_) | Workload::ReadWrite => !self.label.starts_with("redlock"),
            // the fence helpers' own statements are prepared on the caller's
            // connection, which a transaction pooler does not keep
            Workload::OwnStore => OwnStore::supports(&self.url) && self.label != PGBOUNCER,
            Workload::Once => OwnStore::keeps_results(&self.url) && self.label != PGBOUNCER,
        }
    }

    /// The URL worker `id` connects with.
    #[must_use]
    pub fn url_for(&self, id: u32) -> String {
        match &self.ensemble {
            Some(e) => e.url(usize::try_from(id).unwrap_or(0)),
            None => self.url.clone(),
        }
    }

    /// A ZooKeeper ensemble started in `dir` for this run alone, its peers wired
    /// through fault proxies (`syncLimit` 3 s, past the 1 s session).
    pub async fn partitionable_zookeeper(dir: &std::path::Path) -> Self {
        let e = PartitionableEnsemble::start(dir, 15).await;
        // a few cycles through every server first: fresh JVMs answer slowly at first,
        // which would eat into the short runs' time
        for a in &e.client_addrs {
            if let Ok(lock) = dlock_any::connect(&format!("zk://{a}?session_timeout=1s")).await
                && let Ok(name) = dlock_any::LockName::new("faults/warm-up")
            {
                for _ in 0..20 {
                    if let Ok(Some(l)) = lock
                        .try_acquire(&name, std::time::Duration::from_secs(1))
                        .await
                    {
                        let _ = lock.release(&l).await;
                    }
                }
            }
        }
        let url = format!("zk://{}?session_timeout=1s", e.client_addrs.join(","));
        let label = "zookeeper×3 (peer links cut)";
        Self::private(label, url, Ensemble::ZooKeeper(Arc::new(e)))
    }

    /// An etcd cluster started in `dir` for this run alone, its peer links through
    /// sender-filtering proxies.
    pub async fn partitionable_etcd(dir: &std::path::Path) -> Self {
        let e = PartitionableEtcd::start(dir).await;
        let url = format!("etcd://{}", e.client_addrs.join(","));
        Self::private("etcd×3 (peer links cut)", url, Ensemble::Etcd(Arc::new(e)))
    }

    /// A backend on an `ensemble` of this run alone (no shared server to take).
    fn private(label: &'static str, url: String, ensemble: Ensemble) -> Self {
        Self {
            label,
            url,
            servers: vec![],
            has_leader: true,
            redis: false,
            ensemble: Some(ensemble),
        }
    }
}

/// The label of PostgreSQL with its streaming standby: only its failover applies (the
/// primary alone is the `postgres` backend).
pub const POSTGRES_PAIR: &str = "postgres+standby";

/// The label of the Redis Cluster (3 masters with a replica each).
pub const REDIS_CLUSTER: &str = "redis-cluster";

/// The label of PostgreSQL reached through PgBouncer in transaction mode.
pub const PGBOUNCER: &str = "pgbouncer";

/// The label of the Redis master, its two replicas and three sentinels: only the
/// failover applies (single Redis has the other faults).
pub const REDIS_SENTINEL: &str = "redis-sentinel";

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// The backend labelled `label`, for a test: its servers' address in `env_var` (and
/// `DLOCK_SVC_DIR`) is required (with `CI=true` a missing one fails the test), and its
/// SQLite file, if any, goes in a fresh directory named after `scratch`.
///
/// # Panics
/// A required server's address missing under `CI=true`; no backend of that label in
/// the environment; the scratch directory not made.
#[must_use]
pub fn for_test(label: &str, env_var: Option<&str>, scratch: &str) -> Backend {
    if let Some(v) = env_var {
        let _ = dlock_conformance::required_env(v);
        let _ = dlock_conformance::required_env("DLOCK_SVC_DIR");
    }
    let dir = std::env::temp_dir().join(format!("{scratch}-{:016x}", dlock_any::random_u64()));
    #[allow(clippy::expect_used)] // a test's setup: failing it is the report
    {
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        from_env(&dir.display().to_string())
            .into_iter()
            .find(|b| b.label == label)
            .expect("the backend is in the environment")
    }
}

/// Every backend whose server address is in the environment (as `scripts/services`
/// prints it). `sqlite_dir` holds the SQLite file.
#[must_use]
pub fn from_env(sqlite_dir: &str) -> Vec<Backend> {
    let hosts = |urls: &str, scheme: &str| urls.replace(scheme, "");
    let mut out = vec![Backend {
        label: "sqlite",
        url: format!("sqlite://{sqlite_dir}/faults.sqlite"),
        servers: vec![],
        has_leader: false,
        redis: false,
        ensemble: None,
    }];
    let mut add = |label, url: Option<String>, servers: Vec<&'static str>, has_leader| {
        if let Some(url) = url {
            out.push(Backend {
                label,
                redis: label == "redis" || label == "redlock×5",
                url,
                servers,
                has_leader,
                ensemble: None,
            });
        }
    };
    add(
        "postgres",
        env("DLOCK_TEST_POSTGRES_URL"),
        vec!["pg"],
        false,
    );
    add(
        POSTGRES_PAIR,
        env("DLOCK_TEST_POSTGRES_STANDBY_URL").and(env("DLOCK_TEST_POSTGRES_URL")),
        vec!["pg", "pg-standby"],
        false,
    );
    add(
        PGBOUNCER,
        env("DLOCK_TEST_PGBOUNCER_URL").map(|u| {
            let sep = if u.contains('?') { '&' } else { '?' };
            format!("{u}{sep}pooler=transaction")
        }),
        vec!["pgbouncer"],
        false,
    );
    add("mariadb", env("DLOCK_TEST_MYSQL_URL"), vec!["mysql"], false);
    add("redis", env("DLOCK_TEST_REDIS_URL"), vec!["redis"], false);
    add(
        REDIS_CLUSTER,
        env("DLOCK_TEST_REDIS_CLUSTER_URL"),
        crate::cluster::SERVERS.to_vec(),
        false,
    );
    add(
        REDIS_SENTINEL,
        env("DLOCK_TEST_REDIS_SENTINEL_URL"),
        crate::sentinel::SERVERS.to_vec(),
        false,
    );
    add(
        "redlock×5",
        // nodes restarted by a fault rest 4 s (past the runs' 1 s TTL and the 2 s a
        // token may run ahead) instead of the default minute, so the next run has them
        env("DLOCK_TEST_REDLOCK_URLS")
            .map(|u| format!("redlock://{}?restart-delay=4s", hosts(&u, "redis://"))),
        vec!["redis-r1", "redis-r2", "redis-r3", "redis-r4", "redis-r5"],
        false,
    );
    add(
        "etcd",
        env("DLOCK_TEST_ETCD_ENDPOINTS").map(|u| format!("etcd://{}", hosts(&u, "http://"))),
        vec!["etcd"],
        false,
    );
    add(
        "etcd×3",
        env("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS")
            .map(|u| format!("etcd://{}", hosts(&u, "http://"))),
        vec!["etcd-c1", "etcd-c2", "etcd-c3"],
        true,
    );
    add(
        "zookeeper",
        env("DLOCK_TEST_ZK_ADDR").map(|a| format!("zk://{a}?session_timeout=1s")),
        vec!["zk"],
        false,
    );
    add(
        "zookeeper×3",
        env("DLOCK_TEST_ZK_CLUSTER_ADDR").map(|a| format!("zk://{a}?session_timeout=1s")),
        vec!["zk-c1", "zk-c2", "zk-c3"],
        true,
    );
    out
}
