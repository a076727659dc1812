//! The holder faults alone (kill -9, SIGSTOP past the TTL) on the mutex, fenced, for
//! Redis Cluster and PgBouncer.

use dlock_faults::Nemesis;
use dlock_faults::report::table;

use crate::suite::mutex_under;
use crate::{backend, take_servers};

/// The holder faults (kill -9, SIGSTOP past the TTL) on the mutex, fenced: no overlap,
/// no stale write, no lost increment, and a crashed holder replaced within TTL + 1 s.
async fn holder_faults(label: &str, env_var: Option<&str>) {
    let b = backend(label, env_var);
    let _taken = take_servers(&b).await;
    let mut rows = Vec::new();
    // a cluster failover, which may break exclusion, has a test of its own
    for nemesis in b
        .nemeses()
        .into_iter()
        .filter(|n| *n != Nemesis::ClusterFailover)
    {
        rows.push(mutex_under(&b, nemesis).await);
    }
    eprintln!("{}", table(&rows));
}

faults_on! { holder_faults =>
    redis_cluster: dlock_faults::backends::REDIS_CLUSTER, Some("DLOCK_TEST_REDIS_CLUSTER_URL");
    pgbouncer: dlock_faults::backends::PGBOUNCER, Some("DLOCK_TEST_PGBOUNCER_URL");
}
