//! The conformance suite on PostgreSQL through PgBouncer in transaction mode, where
//! every transaction may run on another server connection: no session state, no
//! `LISTEN` (waiters poll), no statement prepared in one transaction and run in the next.

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::pgbouncer_url(),
    }
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);
