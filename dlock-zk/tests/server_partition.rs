//! A follower cut off from its peers keeps answering its clients' reads until it gives
//! up on the leader (`syncLimit` ticks), while the leader expires the sessions it can
//! no longer hear from and hands their locks to others. A holder connected only to that
//! follower must know its lease is lost before anyone else holds the lock: renewals are
//! confirmed through the leader (a `sync` ahead of the read), not by the follower's
//! stale copy. Private ensemble, peers wired through fault proxies.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{PartitionableEnsemble, cut_off_holder_is_lost_before_takeover};
use dlock_core::random_u64;
use dlock_zk::ZkLock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_behind_a_cut_off_follower_loses_its_lease_before_anyone_else_holds() {
    let dir = std::env::temp_dir().join(format!("dlock-zk-partition-{:016x}", random_u64()));
    // a follower serves for syncLimit × tickTime = 3 s after losing the leader, well
    // past the holder's 1 s session
    let ensemble = PartitionableEnsemble::start(&dir, 15).await;
    let leader = ensemble.leader().await.expect("a leader");
    let follower = (leader + 1) % 3;
    let session = Duration::from_secs(1);
    let connect = |addr: String| async move {
        ZkLock::builder(&addr)
            .session_timeout(session)
            .timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap()
    };
    let holder = connect(ensemble.client_addrs[follower].clone()).await;
    let other = connect(ensemble.client_addrs[leader].clone()).await;
    cut_off_holder_is_lost_before_takeover(Arc::new(holder), Arc::new(other), session, || {
        ensemble.partition(follower);
    })
    .await;
    ensemble.heal(follower);
    let _ = std::fs::remove_dir_all(&dir);
}
