//! Expiry decided by the database's clock, not the client's, on PostgreSQL, MySQL and
//! SQLite.

use std::time::Duration;

use dlock_conformance::take;
use dlock_core::{DistributedLock, LockError, LockName};

use super::{LONG, name};
use crate::common;

/// Moves a lock row's expiry, as the database's own clock sees it, by `offset_ms`.
async fn shift_expiry(url: &str, table: &str, lock: &LockName, offset_ms: i64) {
    // test names are plain ASCII: safe to splice
    let (name, micros) = (lock.as_str(), offset_ms * 1000);
    let expires_at = if url.starts_with("postgres") {
        format!("clock_timestamp() + {offset_ms} * interval '1 millisecond'")
    } else if url.starts_with("mysql") {
        format!("UTC_TIMESTAMP(6) + INTERVAL {micros} MICROSECOND")
    } else {
        format!("CAST(unixepoch('subsec') * 1000 AS INTEGER) + {offset_ms}")
    };
    let sql = format!("UPDATE {table} SET expires_at = {expires_at} WHERE name = '{name}'");
    common::raw_execute(url, &sql).await;
}

/// Expiry is decided by the database clock: a row the database considers expired is
/// taken even though the holder's client still trusts its lease, and a row the
/// database considers live is not taken even after the client-side TTL has passed.
async fn database_clock_decides(url: &str) {
    let a = common::connect(url).await;
    let b = common::connect(url).await;
    let n = name("clock");
    let lease = take(&a, &n, LONG).await;
    shift_expiry(url, "dlock_locks", &n, -1000).await;
    assert!(lease.is_valid(), "the client still trusts its lease");
    let taken = b
        .try_acquire(&n, LONG)
        .await
        .unwrap()
        .expect("the database says expired");
    assert!(taken.token() > lease.token());
    assert!(matches!(
        a.renew(&lease).await,
        Err(LockError::LeaseLost { .. })
    ));
    assert!(b.release(&taken).await.unwrap());

    let short = Duration::from_millis(200);
    let held = take(&a, &n, short).await;
    shift_expiry(url, "dlock_locks", &n, 3_600_000).await;
    tokio::time::sleep(short * 3).await;
    assert!(!held.is_valid(), "the client-side lease has run out");
    assert!(
        b.try_acquire(&n, LONG).await.unwrap().is_none(),
        "the database still says held: the client's elapsed time must not matter"
    );
    shift_expiry(url, "dlock_locks", &n, -1).await;
}

common::on_databases!(database_clock_decides: postgres, mysql, sqlite);
