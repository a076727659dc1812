//! The conformance suite on the master Redis Sentinel names (`redis-sentinel://`),
//! semaphores and read-write locks included.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Discovered {
    common::Discovered(common::sentinel_url())
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
