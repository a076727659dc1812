//! The backends under test, their URLs from the test environment, and which faults
//! apply to each.

use crate::nemesis::Nemesis;

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
}

impl Backend {
    /// The faults that make sense here.
    #[must_use]
    pub fn nemeses(&self) -> Vec<Nemesis> {
        let mut n = vec![Nemesis::KillHolder, Nemesis::PauseHolder];
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
        n
    }
}

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
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
    }];
    let mut add = |label, url: Option<String>, servers: Vec<&'static str>, has_leader| {
        if let Some(url) = url {
            out.push(Backend {
                label,
                url,
                servers,
                has_leader,
            });
        }
    };
    add(
        "postgres",
        env("DLOCK_TEST_POSTGRES_URL"),
        vec!["pg"],
        false,
    );
    add("mariadb", env("DLOCK_TEST_MYSQL_URL"), vec!["mysql"], false);
    add("redis", env("DLOCK_TEST_REDIS_URL"), vec!["redis"], false);
    add(
        "redlock×5",
        env("DLOCK_TEST_REDLOCK_URLS").map(|u| format!("redlock://{}", hosts(&u, "redis://"))),
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
