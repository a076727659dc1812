//! Members of the 3-member etcd cluster killed under load. One test in this binary, so
//! nothing else runs against the cluster while members are down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dlock_conformance::{FencedCounter, services_ctl, unique_name};
use dlock_core::{DistributedLock, LockName};
use tokio::time::{Instant, sleep};

const TTL: Duration = Duration::from_secs(3);

/// Which member (etcd-c1..c3, in endpoint order) leads.
async fn leader(endpoints: &[String]) -> usize {
    let mut ids = Vec::new();
    let mut leader = 0;
    for e in endpoints {
        let mut c = etcd_client::Client::connect([e.as_str()], None)
            .await
            .unwrap();
        let s = c.status().await.unwrap();
        ids.push(s.header().unwrap().member_id());
        leader = s.leader();
    }
    ids.iter().position(|id| *id == leader).expect("a leader")
}

/// Clients hammer one lock with a fenced counter while `fault` runs.
async fn workload_during(
    endpoints: &[String],
    n: &LockName,
    fault: impl std::future::Future<Output = ()>,
) -> (u64, u64, Arc<FencedCounter>) {
    let counter = Arc::new(FencedCounter::default());
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let lock = common::etcd(endpoints).await;
        let (n, counter, stop, failures, done) = (
            n.clone(),
            Arc::clone(&counter),
            Arc::clone(&stop),
            Arc::clone(&failures),
            Arc::clone(&done),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                match lock.acquire(&n, TTL, Duration::from_secs(20)).await {
                    Ok(l) => {
                        counter.enter();
                        let v = counter.value();
                        sleep(Duration::from_millis(2)).await;
                        // a holder whose lease may have run out during an election must not write
                        if l.is_valid() {
                            assert!(counter.write(l.token(), v + 1));
                        }
                        counter.leave();
                        if let Err(e) = lock.release(&l).await {
                            eprintln!("release failed: {e}");
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        eprintln!("acquire failed: {e}");
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    fault.await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    (
        done.load(Ordering::SeqCst),
        failures.load(Ordering::SeqCst),
        counter,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_members_killed_under_load() {
    let endpoints = common::cluster();
    let names = ["etcd-c1", "etcd-c2", "etcd-c3"];

    // A follower dies and comes back: nothing fails.
    let l = leader(&endpoints).await;
    let follower = names[(l + 1) % 3];
    let n = unique_name("cluster/follower");
    let (done, failures, counter) = workload_during(&endpoints, &n, async {
        sleep(Duration::from_millis(500)).await;
        services_ctl("kill", &[follower]).await;
        sleep(Duration::from_secs(2)).await;
        services_ctl("start", &[follower]).await;
        sleep(Duration::from_millis(500)).await;
    })
    .await;
    assert_eq!(
        failures, 0,
        "a follower's death must not fail any operation"
    );
    assert!(done > 20, "only {done} cycles");
    assert_eq!(counter.overlaps(), 0);
    assert_eq!(counter.rejected(), 0);

    // The leader dies while a lock is held and others queue: never two holders, the
    // waiters proceed after the election.
    let l = leader(&endpoints).await;
    let n = unique_name("cluster/leader");
    let (done, _failures, counter) = workload_during(&endpoints, &n, async {
        sleep(Duration::from_millis(500)).await;
        services_ctl("kill", &[names[l]]).await;
        sleep(Duration::from_secs(3)).await;
    })
    .await;
    assert_eq!(counter.overlaps(), 0, "two holders at once");
    assert_eq!(counter.rejected(), 0, "a token went backwards");
    assert!(
        done > 10,
        "waiters did not proceed after the election: {done} cycles"
    );
    services_ctl("start", &[names[l]]).await;
    let lock = common::etcd(&endpoints).await;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(l)) = lock.try_acquire(&n, TTL).await {
            assert!(lock.release(&l).await.unwrap());
            break;
        }
        assert!(Instant::now() < end, "cluster did not recover");
        sleep(Duration::from_millis(100)).await;
    }
}
