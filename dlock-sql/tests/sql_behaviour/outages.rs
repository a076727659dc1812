//! A database that is busy, away, or answers too late: `Unavailable` after the
//! operation timeout and recovery, an outage reported as such, a late grant taken again.

use std::time::{Duration, Instant};

use dlock_conformance::take_and_release;
use dlock_core::{DistributedLock, LockError};
use dlock_sql::SqlLock;

use super::{LONG, name};
use crate::common;

/// A lock on a fresh SQLite database whose operations give up after `op_timeout`, and
/// another connection holding the database's write lock (an open `BEGIN IMMEDIATE`)
/// until it sends `COMMIT`.
async fn busy_sqlite(op_timeout: Duration) -> (SqlLock, sqlx::pool::PoolConnection<sqlx::Sqlite>) {
    let url = common::sqlite_url();
    let lock = SqlLock::builder(&url)
        .op_timeout(op_timeout)
        .connect()
        .await
        .unwrap();
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let mut blocker = pool.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    (lock, blocker)
}

/// A database locked by another writer: operations give up with `Unavailable` after
/// the operation timeout, and work again once the other writer commits.
#[tokio::test]
async fn sqlite_busy_database_gives_unavailable_then_recovers() {
    let (lock, mut blocker) = busy_sqlite(Duration::from_millis(500)).await;
    let n = name("busy");
    let t = Instant::now();
    let r = lock.try_acquire(&n, LONG).await;
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(3));
    // the busy statement gave up by itself: nothing lands after the writer leaves
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("COMMIT").execute(&mut *blocker).await.unwrap();
    assert!(
        lock.inspect(&n).await.unwrap().is_none(),
        "a timed-out acquire must not win later"
    );
    take_and_release(&lock, &n, LONG).await;
}

/// `acquire` keeps waiting through transient errors and reports the outage (not a
/// timeout) if the database stays away for the whole wait.
#[tokio::test]
async fn sqlite_acquire_reports_outage_not_timeout() {
    let (lock, mut blocker) = busy_sqlite(Duration::from_millis(200)).await;
    let r = lock
        .acquire(&name("outage"), LONG, Duration::from_millis(600))
        .await;
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");
    sqlx::query("COMMIT").execute(&mut *blocker).await.unwrap();
}

/// An acquire whose first statement commits after the client gave up on its reply
/// takes that row again on its next attempt (same owner id) instead of waiting a whole
/// TTL behind itself.
#[cfg(feature = "server-tests")]
async fn late_grant_is_taken_again(url: &str) {
    let timeout = Duration::from_millis(400);
    dlock_conformance::late_grant_is_taken_again(url, timeout, |url, timeout| async move {
        SqlLock::builder(&url)
            .op_timeout(timeout)
            .connect()
            .await
            .unwrap()
    })
    .await;
}

#[cfg(feature = "server-tests")]
common::on_databases!(late_grant_is_taken_again: postgres, mysql);
