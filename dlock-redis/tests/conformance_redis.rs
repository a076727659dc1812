//! The conformance suite on one Redis server, semaphores and read-write locks included.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::Single {
    common::Single(common::redis_url())
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
