//! PostgreSQL behind PgBouncer (transaction mode), with the pooler restarted and then
//! PostgreSQL restarted behind it, under a held lock and a waiter: the errors either
//! restart brings (a dropped client connection; PgBouncer's own `08P01` "server conn
//! crashed?" and login errors while PostgreSQL comes back) are outages to ride out,
//! not answers. One test in this binary, so nothing else runs against the servers
//! while they are down.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{acquiring, guarded, services_ctl, unique_name};
use dlock_core::{DistributedLock, GuardState};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooler_and_database_restarted_under_a_holder_and_a_waiter() {
    let url = common::pgbouncer_url();
    let holder: Arc<dyn DistributedLock> = Arc::new(common::connect(&url).await);
    let waiter: Arc<dyn DistributedLock> = Arc::new(common::connect(&url).await);
    let name = unique_name("pooler-restart");
    // a TTL that outlasts both restarts: the holder keeps its lock across them
    let ttl = Duration::from_secs(15);
    let guard = guarded(&holder, &name, ttl).await;
    let first = guard.token();
    let wait = acquiring(&waiter, &name, ttl, Duration::from_secs(40));
    tokio::time::sleep(Duration::from_millis(300)).await;
    services_ctl("restart", &["pgbouncer"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    services_ctl("restart", &["pg"]).await;
    assert_ne!(
        guard.state(),
        GuardState::Lost,
        "renewals ride out the restarts"
    );
    assert!(
        !wait.is_finished(),
        "the waiter waits, and only for the lock: {:?}",
        wait.await
    );
    // at once, on a pool whose every connection died: the release finds a live one
    // (PgBouncer refuses logins for a moment after PostgreSQL's restart —
    // `server_login_retry`, 1 s in scripts/services — inside the 2 s op timeout)
    let released = guard.release().await;
    assert!(
        matches!(released, Ok(true)),
        "the holder's release rides out the restarts: {released:?}"
    );
    let taken = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the waiter gets the lock once it is released")
        .unwrap()
        .expect("the waiter rode out both restarts");
    assert!(taken.token() > first, "{} after {first}", taken.token());
    assert!(waiter.release(&taken).await.unwrap());
}
