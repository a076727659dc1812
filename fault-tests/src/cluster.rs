//! A Redis Cluster master failed over to a replica that fell behind, on the cluster
//! of 3 masters with a replica each that `scripts/services up --cluster` starts.
//!
//! The master of the lock's slot has its replica paused (`SIGSTOP`) and its replication
//! link closed, so the replica falls behind while the workload moves on; then the master
//! is killed and the replica resumed: the cluster promotes it without the last grants,
//! and the workers' cluster clients follow the new slot map. Afterwards the old master
//! is started again and rejoins as the new one's replica.

use std::path::Path;
use std::time::Duration;

use tokio::time::sleep;

use crate::nemesis::{redis_bulk, services};

/// The cluster's servers, by `scripts/services` name.
pub const SERVERS: [&str; 6] = [
    "redis-c1", "redis-c2", "redis-c3", "redis-c4", "redis-c5", "redis-c6",
];

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug)]
struct Node {
    id: String,
    /// `host:port`, the cluster bus port taken off.
    addr: String,
    master: bool,
    failed: bool,
    /// The id of the master a replica follows.
    follows: Option<String>,
    /// The slot ranges a master serves.
    slots: Vec<(u16, u16)>,
}

impl Node {
    fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split(' ').collect();
        let flags: Vec<&str> = f.get(2)?.split(',').collect();
        let slots = f
            .get(8..)
            .unwrap_or_default()
            .iter()
            .filter(|r| !r.starts_with('['))
            .filter_map(|r| match r.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => r.parse().ok().map(|s| (s, s)),
            })
            .collect();
        Some(Self {
            id: (*f.first()?).to_owned(),
            addr: f.get(1)?.split('@').next()?.to_owned(),
            master: flags.contains(&"master"),
            // `fail?`: suspected by this node, not yet agreed
            failed: flags.contains(&"fail") || flags.contains(&"fail?"),
            follows: f.get(3).filter(|m| **m != "-").map(|m| (*m).to_owned()),
            slots,
        })
    }

    fn owns(&self, slot: u16) -> bool {
        self.master && !self.failed && self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// The seeds of a `redis-cluster://h1:p,h2:p/…` URL.
fn seeds(url: &str) -> Vec<String> {
    let rest = url.strip_prefix("redis-cluster://").unwrap_or(url);
    let hosts = rest.split(['/', '?']).next().unwrap_or_default();
    hosts
        .split(',')
        .map(|h| h.rsplit('@').next().unwrap_or(h).to_owned())
        .collect()
}

/// The cluster as the first node among `from` that answers sees it.
async fn nodes(from: &[String]) -> Option<Vec<Node>> {
    for h in from {
        if let Some(text) = redis_bulk(h, &["CLUSTER", "NODES"]).await {
            return Some(text.lines().filter_map(Node::parse).collect());
        }
    }
    None
}

/// Every node's address the cluster knows, seeds first: a seed may be the node killed.
async fn everyone(url: &str) -> Vec<String> {
    let mut all = seeds(url);
    if let Some(nodes) = nodes(&all).await {
        for n in nodes {
            if !all.contains(&n.addr) {
                all.push(n.addr);
            }
        }
    }
    all
}

/// The hash tag dlock's tagged key layout gives `name` (`dlock:{name}:lock`).
fn tag(name: &str) -> String {
    name.replace('%', "%25")
        .replace('{', "%7B")
        .replace('}', "%7D")
}

/// A key in the slot of the lock `name`, for the marker.
fn marker(name: &str) -> String {
    format!("dlock-faults:{{{}}}:marker", tag(name))
}

/// The `scripts/services` name of the cluster node listening on `addr`.
fn service_on(addr: &str) -> Option<&'static str> {
    let port = addr.rsplit(':').next()?;
    let dir = std::path::PathBuf::from(std::env::var_os("DLOCK_SVC_DIR")?).join("run");
    SERVERS.into_iter().find(|name| {
        std::fs::read_to_string(dir.join(format!("{name}.start")))
            .is_ok_and(|s| s.contains(&format!("--port {port} ")))
    })
}

/// Pauses the replica of the lock `name`'s master, cuts its link, lets the workload run
/// 1.5 s, kills the master and resumes the replica; whether all of it could be done
/// (the lock's fence key on that master shows it is the lock's).
pub async fn fail_over_to_a_lagging_replica(script: &Path, url: &str, name: &str) -> bool {
    let seeds = seeds(url);
    let Some(slot) = integer(&seeds, &["CLUSTER", "KEYSLOT", &marker(name)])
        .await
        .and_then(|s| s.parse::<u16>().ok())
    else {
        return false;
    };
    let Some(all) = nodes(&seeds).await else {
        return false;
    };
    let Some(master) = all.iter().find(|n| n.owns(slot)).cloned() else {
        return false;
    };
    let replicas: Vec<&'static str> = all
        .iter()
        .filter(|n| n.follows.as_deref() == Some(master.id.as_str()) && !n.failed)
        .filter_map(|n| service_on(&n.addr))
        .collect();
    let (Some(old), false) = (service_on(&master.addr), replicas.is_empty()) else {
        return false;
    };
    // dlock's default prefix, which the fault suite's URLs keep
    let fence = format!("dlock:{{{}}}:fence", tag(name));
    let here = std::slice::from_ref(&master.addr);
    let is_the_locks = integer(here, &["EXISTS", &fence]).await;
    let paused = services(script, "pause", &replicas).await;
    // what the master had sent sits in the paused replica's socket buffer and would
    // reach it on resume: close the link, so nothing after this does
    let cut = integer(here, &["CLIENT", "KILL", "TYPE", "replica"])
        .await
        .is_some();
    let marked = crate::nemesis::redis_command(&master.addr, &["SET", &marker(name), "1"]).await;
    // the workload moves on without the replica: holders change, counters grow
    sleep(Duration::from_millis(1500)).await;
    let killed = services(script, "kill", &[old]).await;
    let resumed = services(script, "resume", &replicas).await;
    is_the_locks.as_deref() == Some("1") && paused && cut && marked && killed && resumed
}

/// An integer answer (`:N`) of the first of `hosts` that gives one, as text.
async fn integer(hosts: &[String], args: &[&str]) -> Option<String> {
    for h in hosts {
        let ask = async {
            let client = redis::Client::open(format!("redis://{h}")).ok()?;
            let mut c = client.get_multiplexed_async_connection().await.ok()?;
            let mut cmd = redis::cmd(args.first()?);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            cmd.query_async::<i64>(&mut c).await.ok()
        };
        if let Ok(Some(n)) = tokio::time::timeout(Duration::from_secs(5), ask).await {
            return Some(n.to_string());
        }
    }
    None
}

/// Whether the promoted master lacks the marker (it fell behind, as staged); then
/// starts every cluster node that is down and waits until the cluster is whole again:
/// `cluster_state:ok` and every master followed by a replica in sync. Whether all of
/// that held, within about a minute.
pub async fn restore(script: &Path, url: &str, name: &str) -> bool {
    let all = everyone(url).await;
    let key = marker(name);
    // the slot's new master first: started again before its replica was promoted, the
    // old one (no data kept) would take the slot back empty and undo the failover
    let mut lagged = false;
    for _ in 0..100 {
        if let Some(owner) = owner_of(&all, &key).await {
            let owner = std::slice::from_ref(&owner);
            // EXISTS answers 0 when the promoted replica never got the marker
            if let Some(n) = integer(owner, &["EXISTS", &key]).await {
                lagged = n == "0";
                let _ = integer(owner, &["DEL", &key]).await;
                break;
            }
        }
        sleep(Duration::from_millis(200)).await;
    }
    if !services(script, "start", &SERVERS).await {
        return false;
    }
    for _ in 0..300 {
        if whole(&all).await {
            return lagged;
        }
        sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The address of the master that serves `key`'s slot, as the nodes among `all` see it.
async fn owner_of(all: &[String], key: &str) -> Option<String> {
    let slot = integer(all, &["CLUSTER", "KEYSLOT", key])
        .await?
        .parse::<u16>()
        .ok()?;
    nodes(all)
        .await?
        .into_iter()
        .find(|n| n.owns(slot))
        .map(|n| n.addr)
}

/// Whether every node answers `cluster_state:ok` and every master has a replica whose
/// link to it is up.
async fn whole(all: &[String]) -> bool {
    for h in all {
        let Some(info) = redis_bulk(h, &["CLUSTER", "INFO"]).await else {
            return false;
        };
        if !info.contains("cluster_state:ok") {
            return false;
        }
        let Some(repl) = redis_bulk(h, &["INFO", "replication"]).await else {
            return false;
        };
        let in_sync = repl.contains("role:master") && repl.contains("state=online")
            || repl.contains("role:slave") && repl.contains("master_link_status:up");
        if !in_sync {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_parse_flags_and_slots() {
        let m = Node::parse(
            "ab 127.0.0.1:27050@27060 myself,master - 0 0 1 connected 0-5460 5461 [5462->-cd]",
        )
        .unwrap();
        assert!(m.master && !m.failed);
        assert!(m.owns(0) && m.owns(5461) && !m.owns(5462));
        let r =
            Node::parse("cd 127.0.0.1:27053@27063 slave,nofailover ab 0 0 1 connected").unwrap();
        assert!(!r.master && !r.failed && r.follows.as_deref() == Some("ab"));
        assert_eq!(r.addr, "127.0.0.1:27053");
        let f = Node::parse("ef 127.0.0.1:27051@27061 master,fail? - 0 0 2 connected 5461-10922")
            .unwrap();
        assert!(f.failed && !f.owns(6000));
    }

    #[test]
    fn the_marker_shares_the_lock_keys_tag() {
        let name = "faults/redis-cluster/00ff";
        assert_eq!(
            marker(name),
            "dlock-faults:{faults/redis-cluster/00ff}:marker"
        );
        assert_eq!(tag("a{b}%"), "a%7Bb%7D%25");
    }
}
