//! The conformance suite on PostgreSQL through PgBouncer in transaction mode, where
//! every transaction may run on another server connection: no session state, no
//! `LISTEN` (waiters poll), no statement prepared in one transaction and run in the next.
#![cfg(feature = "server-tests")]

mod common;

async fn harness() -> common::SqlHarness {
    common::SqlHarness {
        url: common::pgbouncer_url(),
    }
}

dlock_conformance::conformance_suite!(harness);

// its semaphores and read-write locks, each exclusive side as a mutex
dlock_conformance::shared_as_mutex_suite!(harness);

/// Without `pooler=transaction`, a stock PgBouncer refuses the startup parameter sqlx
/// sends, and the error says what to add rather than that the server is down.
#[tokio::test]
async fn a_pooler_not_named_in_the_url_is_a_config_error_that_says_so() {
    let plain = dlock_conformance::required_env("DLOCK_TEST_PGBOUNCER_URL");
    match dlock_sql::SqlLock::connect(&plain).await {
        Err(dlock_core::LockError::Config(msg)) => {
            assert!(msg.contains("pooler=transaction"), "{msg}");
            assert!(!msg.contains(":postgres@"), "no password shown: {msg}");
        }
        other => panic!("expected a Config error naming pooler=transaction: {other:?}"),
    }
}
