//! A member cut off from its peers while its clients still reach it: a holder connected
//! only to that member must know its lease is lost before anyone else holds the lock.
//! Keep-alives and the attached-keys read need the leader (and every request carries
//! `require_leader`), so the cut-off member cannot confirm a renewal. Private cluster,
//! peer links through sender-filtering proxies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{PartitionableEtcd, cut_off_holder_is_lost_before_takeover};
use dlock_core::random_u64;
use dlock_etcd::EtcdLock;

async fn client(addr: &str) -> EtcdLock {
    EtcdLock::builder(&[&format!("http://{addr}")])
        .timeout(Duration::from_millis(800))
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_behind_a_cut_off_member_loses_its_lease_before_anyone_else_holds() {
    let dir = std::env::temp_dir().join(format!("dlock-etcd-partition-{:016x}", random_u64()));
    let cluster = PartitionableEtcd::start(&dir).await;
    let leader = cluster.leader().await.expect("a leader");
    let follower = (leader + 1) % 3;
    let holder = client(&cluster.client_addrs[follower]).await;
    let other = client(&cluster.client_addrs[leader]).await;
    cut_off_holder_is_lost_before_takeover(
        Arc::new(holder),
        Arc::new(other),
        Duration::from_secs(2),
        || cluster.partition(follower),
    )
    .await;
    cluster.heal();
    let _ = std::fs::remove_dir_all(&dir);
}
