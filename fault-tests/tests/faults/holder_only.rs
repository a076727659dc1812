//! The holder faults alone (kill -9, SIGSTOP past the TTL) on the mutex, fenced, for
//! Redis Cluster and PgBouncer.

use std::time::Duration;

use dlock_faults::Nemesis;
use dlock_faults::report::{Row, table};

use crate::{SERIAL, TTL, backend, judged, plan};

/// The holder faults (kill -9, SIGSTOP past the TTL) on the mutex, fenced: no overlap,
/// no stale write, no lost increment, and a crashed holder replaced within TTL + 1 s.
async fn holder_faults(label: &str, env_var: &str) {
    let _serial = SERIAL.lock().await;
    let b = backend(label, Some(env_var));
    let mut rows = Vec::new();
    // a cluster failover, which may break exclusion, has a test of its own
    for nemesis in b
        .nemeses()
        .into_iter()
        .filter(|n| *n != Nemesis::ClusterFailover)
    {
        let o = judged(&plan(true), &b, nemesis).await;
        let v = &o.verdict;
        rows.push(Row {
            backend: label.into(),
            nemesis: nemesis.label().into(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        });
        assert!(
            o.applied,
            "{label}: {} could not be applied",
            nemesis.label()
        );
        assert!(
            v.safe_under(nemesis),
            "{label} / {}: {v:?}\n{}",
            nemesis.label(),
            o.evidence.as_deref().unwrap_or_default()
        );
        assert_eq!(v.lost_increments, 0, "{label} / {}: {v:?}", nemesis.label());
        assert!(v.ops > 0, "{label} / {}: no progress", nemesis.label());
        // a dead holder, or a dead waiter granted the lock, holds it one TTL at most
        if matches!(nemesis, Nemesis::KillHolder | Nemesis::KillWaiter) {
            let r = o.recovery.expect("someone took over");
            assert!(r <= TTL + Duration::from_secs(1), "{label}: recovery {r:?}");
        }
    }
    eprintln!("{}", table(&rows));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster() {
    holder_faults(
        dlock_faults::backends::REDIS_CLUSTER,
        "DLOCK_TEST_REDIS_CLUSTER_URL",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer() {
    holder_faults(
        dlock_faults::backends::PGBOUNCER,
        "DLOCK_TEST_PGBOUNCER_URL",
    )
    .await;
}
