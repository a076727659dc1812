//! The idempotency helper on each SQL dialect's records.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::connect;
use dlock_conformance::idempotency::{Side, idempotency_suite};

async fn side(url: &str) -> Side {
    let lock = connect(url).await;
    (Arc::new(lock.clone()), Arc::new(lock.results()))
}

async fn suite(url: &str) {
    idempotency_suite(side(url).await, side(url).await, Duration::from_millis(500)).await;
}

// PgBouncer in transaction mode (`pooler=transaction`) too
common::on_databases!(suite: postgres, pgbouncer, mysql, sqlite);
