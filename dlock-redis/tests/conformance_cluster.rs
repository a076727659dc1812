//! The conformance suite on a Redis Cluster (`redis-cluster://`, 3 masters with a
//! replica each), semaphores and read-write locks included.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Discovered {
    common::Discovered(common::cluster_url())
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
