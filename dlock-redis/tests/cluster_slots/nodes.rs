//! The cluster as its nodes report it: the seed addresses, commands sent to one node,
//! the masters and the slots each owns.

use crate::common;

/// A master of the cluster: its id and address.
#[derive(Clone, Debug)]
pub(crate) struct Master {
    pub(crate) id: String,
    pub(crate) addr: String,
    pub(crate) slots: Vec<(u16, u16)>,
}

/// The seed addresses of the cluster URL.
pub(crate) fn seeds() -> Vec<String> {
    let url = common::cluster_url();
    let hosts = url.trim_start_matches("redis-cluster://");
    hosts.split(',').map(str::to_owned).collect()
}

async fn conn(addr: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub(crate) async fn cmd<T: redis::FromRedisValue>(addr: &str, args: &[&str]) -> T {
    let mut c = conn(addr).await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{args:?} on {addr}: {e}"))
}

/// The masters, from `CLUSTER NODES`.
pub(crate) async fn masters() -> Vec<Master> {
    let nodes: String = cmd(&seeds()[0], &["CLUSTER", "NODES"]).await;
    nodes
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            if !f.get(2)?.contains("master") || f.get(2)?.contains("fail") {
                return None;
            }
            let addr = f.get(1)?.split('@').next()?.to_owned();
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|n| (n, n)),
                })
                .collect();
            Some(Master {
                id: f[0].to_owned(),
                addr,
                slots,
            })
        })
        .collect()
}

pub(crate) fn owns(m: &Master, slot: u16) -> bool {
    m.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
}
