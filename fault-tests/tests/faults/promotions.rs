//! A primary lost and a standby or replica promoted that missed the last grants
//! (PostgreSQL, Redis Sentinel, Redis Cluster): no stale write accepted.

use std::time::Duration;

use dlock_conformance::required_env;
use dlock_faults::Nemesis;
use dlock_faults::report::{Row, table};
use dlock_faults::run::{Plan, run};

use crate::{assert_safe, backend, judged, plan, take_servers};

/// A failover to a standby that missed the last grants: overlaps are possible (the
/// standby forgot holders), but tokens never go back — a grant takes at least the
/// database clock in µs — so the fence accepts no stale write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_standby_promoted() {
    let _ = required_env("DLOCK_TEST_POSTGRES_STANDBY_URL");
    let b = backend(
        dlock_faults::backends::POSTGRES_PAIR,
        Some("DLOCK_TEST_POSTGRES_URL"),
    );
    let _taken = take_servers(&b).await;
    let nemesis = Nemesis::StandbyPromoted;
    let o = judged(&plan(true), &b, nemesis).await;
    eprintln!("{}", table(&[Row::of(b.label, nemesis.label(), &o)]));
    assert_safe(b.label, nemesis.label(), nemesis, &o);
}

/// Redis Sentinel failing over to a replica that missed the last grants: overlaps are
/// possible (the replica forgot holders), but the hybrid token never goes back, so the
/// fence accepts no stale write; the workers, knowing only the sentinels, go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_sentinel_failover() {
    // the kill lands 2.5 s in (the warm-up, then 1.5 s with the replicas cut off) and
    // the sentinels take 1 s to call the master down and about 2 s more to promote:
    // room to see the workers carry on
    replica_failover(
        dlock_faults::backends::REDIS_SENTINEL,
        "DLOCK_TEST_REDIS_SENTINEL_URL",
        Nemesis::SentinelFailover,
        Duration::from_secs(12),
    )
    .await;
}

/// A Redis Cluster master failing over to a replica that missed the last grants: as
/// Sentinel's, overlaps are possible but the hybrid token never goes back, so the fence
/// accepts no stale write; the workers' cluster clients follow the new slot map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_failover() {
    // the kill lands 2.5 s in, and the cluster takes its node timeout (2 s) to call the
    // master failed and about a second more to promote
    replica_failover(
        dlock_faults::backends::REDIS_CLUSTER,
        "DLOCK_TEST_REDIS_CLUSTER_URL",
        Nemesis::ClusterFailover,
        Duration::from_secs(10),
    )
    .await;
}

/// A Redis failover `nemesis` on `label`, in a run of `duration`: staged as planned,
/// no stale write accepted, and a worker locking again afterwards.
async fn replica_failover(label: &str, env_var: &str, nemesis: Nemesis, duration: Duration) {
    let b = backend(label, Some(env_var));
    let _taken = take_servers(&b).await;
    let plan = Plan {
        duration,
        ..plan(true)
    };
    let o = run(&plan, &b, nemesis).await.unwrap();
    eprintln!("{}", table(&[Row::of(b.label, nemesis.label(), &o)]));
    assert_safe(b.label, nemesis.label(), nemesis, &o);
    assert!(
        o.recovery.is_some(),
        "{}: no worker locked after the failover",
        b.label
    );
}
