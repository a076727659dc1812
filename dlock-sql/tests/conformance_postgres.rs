//! The conformance suite on postgres, semaphores and read-write locks included.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::postgres_url(),
    }
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
