//! A follower cut off from its peers keeps answering its clients' reads until it gives
//! up on the leader (`syncLimit` ticks), while the leader expires the sessions it can
//! no longer hear from and hands their locks to others. A holder connected only to that
//! follower must know its lease is lost before anyone else holds the lock: renewals are
//! confirmed through the leader (a `sync` ahead of the read), not by the follower's
//! stale copy. Private ensemble, peers wired through fault proxies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::PartitionableEnsemble;
use dlock_core::{DistributedLock, GuardState, LockGuard, LockName, random_u64};
use dlock_zk::ZkLock;
use tokio::time::{Instant, sleep};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_behind_a_cut_off_follower_loses_its_lease_before_anyone_else_holds() {
    let dir = std::env::temp_dir().join(format!("dlock-zk-partition-{:016x}", random_u64()));
    // a follower serves for syncLimit × tickTime = 3 s after losing the leader, well
    // past the holder's 1 s session
    let ensemble = PartitionableEnsemble::start(&dir, 15).await;
    let leader = ensemble.leader().await.expect("a leader");
    let follower = (leader + 1) % 3;
    let session = Duration::from_secs(1);
    let holder: Arc<dyn DistributedLock> = Arc::new(
        ZkLock::builder(&ensemble.client_addrs[follower])
            .session_timeout(session)
            .timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap(),
    );
    let other = ZkLock::builder(&ensemble.client_addrs[leader])
        .session_timeout(session)
        .connect()
        .await
        .unwrap();
    let name = LockName::new(&format!("partition/{:016x}", random_u64())).unwrap();
    let lease = holder.try_acquire(&name, session).await.unwrap().unwrap();
    let first = lease.token();
    let guard = LockGuard::new(Arc::clone(&holder), lease);
    sleep(session).await;
    assert_eq!(guard.state(), GuardState::Held, "renewed before the cut");

    ensemble.partition(follower);
    let cut = Instant::now();
    let taken = other
        .acquire(&name, Duration::from_secs(30), Duration::from_secs(20))
        .await
        .expect("the leader's side hands the lock on after the holder's session expires");
    let state = guard.state();
    assert!(
        state == GuardState::Lost && !guard.is_held(),
        "another client holds {name} {:?} after the cut while the cut-off holder's guard is {state:?}",
        cut.elapsed()
    );
    assert!(taken.token() > first);
    assert!(other.release(&taken).await.unwrap());
    ensemble.heal(follower);
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}
