//! Connecting and the lock table: table names that cannot inject SQL, a custom table
//! created and used, concurrent first connects, typed connect errors that hide
//! passwords.

use std::time::Duration;

use dlock_conformance::{assert_config_error, assert_unreachable, take};
use dlock_core::{DistributedLock, LockError, random_u64};
use dlock_sql::SqlLock;

use super::{LONG, name};
use crate::common;

#[tokio::test]
async fn table_names_cannot_inject_sql() {
    let url = common::sqlite_url();
    for bad in [
        "x; DROP TABLE dlock_locks",
        "a\"b",
        "dlock_locks --",
        "1abc",
        "",
    ] {
        let r = SqlLock::builder(&url).table(bad).connect().await;
        assert!(matches!(r, Err(LockError::Config(_))), "{bad:?}: {r:?}");
        let encoded = bad.replace(' ', "%20");
        let r = SqlLock::connect(&format!("{url}?table={encoded}")).await;
        assert!(
            matches!(r, Err(LockError::Config(_))),
            "{bad:?} in URL: {r:?}"
        );
    }
}

/// A custom table from the URL or the builder is used (and created) on every database.
async fn custom_table_is_created_and_used(url: &str) {
    let table = format!("dlock_custom_{:08x}", random_u64() as u32);
    let sep = if url.contains('?') { '&' } else { '?' };
    let lock = SqlLock::connect(&format!("{url}{sep}table={table}"))
        .await
        .unwrap();
    let n = name("custom");
    let lease = take(&lock, &n, LONG).await;
    let other = SqlLock::builder(url).table(&table).connect().await.unwrap();
    assert!(
        other.try_acquire(&n, LONG).await.unwrap().is_none(),
        "{}",
        lock.database()
    );
    let default_table = SqlLock::connect(url).await.unwrap();
    assert!(
        default_table.try_acquire(&n, LONG).await.unwrap().is_some(),
        "tables are separate"
    );
    assert!(lock.release(&lease).await.unwrap());
}

common::on_databases!(custom_table_is_created_and_used: postgres, mysql, sqlite);

/// Several processes starting at once on a fresh table all succeed.
async fn concurrent_first_connects_create_the_table_once(url: &str) {
    let table = format!("dlock_race_{:08x}", random_u64() as u32);
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let (url, table) = (url.to_owned(), table.clone());
            tokio::spawn(async move { SqlLock::builder(&url).table(&table).connect().await })
        })
        .collect();
    for t in tasks {
        let lock = t.await.unwrap().unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(lock.inspect(&name("race")).await.unwrap().is_none());
    }
}

common::on_databases!(concurrent_first_connects_create_the_table_once: postgres, mysql, sqlite);

#[tokio::test]
async fn connect_errors_are_typed_and_hide_passwords() {
    assert_config_error(SqlLock::connect("ftp://u:hunter2@h/x").await, "hunter2");
    // nothing listens on port 1
    let nobody =
        SqlLock::builder("postgres://u:hunter2@127.0.0.1:1/db").op_timeout(Duration::from_secs(2));
    assert_unreachable(nobody.connect(), "hunter2", Duration::from_secs(10)).await;
    let zero_pool = "mysql://u:hunter2@127.0.0.1:1/db?pool_size=zero";
    assert_config_error(SqlLock::connect(zero_pool).await, "hunter2");
    let no_timeout = "postgres://u:pw@127.0.0.1:1/db?op_timeout=never";
    assert_config_error(SqlLock::connect(no_timeout).await, "pw@");
}
