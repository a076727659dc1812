//! A member cut off from its peers while its clients still reach it: a holder connected
//! only to that member must know its lease is lost before anyone else holds the lock.
//! Keep-alives and the attached-keys read need the leader (and every request carries
//! `require_leader`), so the cut-off member cannot confirm a renewal. Private cluster,
//! peer links through sender-filtering proxies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::PartitionableEtcd;
use dlock_core::{DistributedLock, GuardState, LockGuard, LockName, random_u64};
use dlock_etcd::EtcdLock;
use tokio::time::{Instant, sleep};

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
    let holder: Arc<dyn DistributedLock> = Arc::new(client(&cluster.client_addrs[follower]).await);
    let other = client(&cluster.client_addrs[leader]).await;
    let name = LockName::new(&format!("partition/{:016x}", random_u64())).unwrap();
    let ttl = Duration::from_secs(2);
    let lease = holder.try_acquire(&name, ttl).await.unwrap().unwrap();
    let first = lease.token();
    let guard = LockGuard::new(Arc::clone(&holder), lease);
    sleep(ttl).await;
    assert_eq!(guard.state(), GuardState::Held, "renewed before the cut");

    cluster.partition(follower);
    let cut = Instant::now();
    let taken = other
        .acquire(&name, Duration::from_secs(30), Duration::from_secs(20))
        .await
        .expect("the majority hands the lock on once the holder's lease expires");
    let state = guard.state();
    assert!(
        state == GuardState::Lost && !guard.is_held(),
        "another client holds {name} {:?} after the cut while the cut-off holder's guard is {state:?}",
        cut.elapsed()
    );
    assert!(taken.token() > first);
    assert!(other.release(&taken).await.unwrap());
    cluster.heal();
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}
