//! The idempotency helper on Redis records.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{redis, redis_url};
use dlock_conformance::idempotency::{Side, idempotency_suite};

async fn side() -> Side {
    let lock = redis(&redis_url()).await;
    (Arc::new(lock.clone()), Arc::new(lock.results()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_records() {
    idempotency_suite(side().await, side().await, Duration::from_millis(500)).await;
}
