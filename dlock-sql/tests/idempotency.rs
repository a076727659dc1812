//! The idempotency helper on each SQL dialect's records.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{connect, mysql_url, pgbouncer_url, postgres_url, sqlite_url};
use dlock_conformance::idempotency::{Side, idempotency_suite};

async fn side(url: &str) -> Side {
    let lock = connect(url).await;
    (Arc::new(lock.clone()), Arc::new(lock.results()))
}

async fn suite(url: &str) {
    idempotency_suite(side(url).await, side(url).await, Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    suite(&postgres_url()).await;
}

/// The records through PgBouncer in transaction mode (`pooler=transaction`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer() {
    suite(&pgbouncer_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    suite(&mysql_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    suite(&sqlite_url()).await;
}
