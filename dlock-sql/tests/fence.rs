//! Fences in the database, on each dialect: a stale token is refused with
//! `StaleToken`, an equal or higher one admitted; inside a transaction the fence and
//! the caller's write commit together or not at all; a concurrent lower token waits for
//! the higher one's transaction and is then refused.
#![cfg_attr(
    not(feature = "server-tests"),
    allow(dead_code, unused_imports, unused_macros)
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{connect, mysql_url, pgbouncer_url, postgres_url, sqlite_url};
use dlock_core::{Fence, FencingToken, LockError, random_u64};
use dlock_sql::fence::{fence_table, updated_or_stale};

fn resource() -> String {
    format!("fence-test/{:016x}", random_u64())
}

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

fn is_stale(r: &Result<(), LockError>, seen: Option<u64>, offered: u64) -> bool {
    matches!(r, Err(LockError::StaleToken { seen: s, offered: o, .. }) if *s == seen && *o == offered)
}

/// `resource`'s mark in the default lock table's fence table, read through `pool` (test
/// resources are plain ASCII: safe to splice).
macro_rules! mark {
    ($pool:expr, $resource:expr) => {{
        let table = fence_table("dlock_locks");
        let sql = format!("SELECT token FROM {table} WHERE resource = '{}'", $resource);
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
            .fetch_one($pool)
            .await
            .unwrap()
    }};
}

/// Token 6 fences `resource` in a transaction of its own (through `fence`) while `tx7`
/// holds token 7's row lock: it must wait for 7's commit, then be refused.
macro_rules! lower_token_waits_then_is_refused {
    ($pool:expr, $tx7:expr, $resource:expr, $fence:path) => {{
        let (pool2, r2) = ($pool.clone(), $resource.clone());
        let (began, begun) = tokio::sync::oneshot::channel();
        let six = tokio::spawn(async move {
            let mut tx6 = pool2.begin().await.unwrap();
            let _ = began.send(());
            let f = $fence(&mut tx6, "dlock_locks", &r2, t(6)).await;
            tx6.rollback().await.unwrap();
            f
        });
        begun.await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !six.is_finished(),
            "the lower token must wait for the higher one's transaction"
        );
        $tx7.commit().await.unwrap();
        let f6 = six.await.unwrap();
        assert!(is_stale(&f6, Some(7), 6), "{f6:?}");
    }};
}

/// The `Fence` trait on the lock's own pool.
async fn trait_fence(url: &str) {
    let lock = connect(url).await;
    let fence = lock.fence();
    let r = resource();
    fence.check_and_raise(&r, t(5)).await.unwrap();
    fence.check_and_raise(&r, t(5)).await.unwrap(); // the same holder again
    let stale = fence.check_and_raise(&r, t(4)).await;
    assert!(is_stale(&stale, Some(5), 4), "{stale:?}");
    fence.check_and_raise(&r, t(9)).await.unwrap();
    let stale = fence.check_and_raise(&r, t(5)).await;
    assert!(is_stale(&stale, Some(9), 5), "{stale:?}");
    // resources are independent
    fence.check_and_raise(&resource(), t(1)).await.unwrap();
    // token 0 (a fallback's lease) passes no fence, even on a fresh resource
    let zero = fence.check_and_raise(&resource(), t(0)).await;
    assert!(
        matches!(zero, Err(LockError::StaleToken { .. })),
        "{zero:?}"
    );
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fence() {
    let url = postgres_url();
    trait_fence(&url).await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let demo = format!("fence_demo_{:x}", random_u64() >> 8);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {demo} (id BIGINT PRIMARY KEY, v TEXT NOT NULL, fence BIGINT NOT NULL)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let r = resource();
    let write = |v: &'static str, id: i64| {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {demo} (id, v, fence) VALUES ({id}, '{v}', 0)"
        )))
    };
    // token 7 fences and writes in one transaction: both commit
    let mut tx7 = pool.begin().await.unwrap();
    dlock_sql::fence::fence_postgres(&mut tx7, "dlock_locks", &r, t(7))
        .await
        .unwrap();
    write("seven", 1).execute(&mut *tx7).await.unwrap();
    // meanwhile token 6 waits for 7's row lock, then is refused
    lower_token_waits_then_is_refused!(pool, tx7, r, dlock_sql::fence::fence_postgres);
    // a stale transaction's write is rolled back with it
    let mut tx5 = pool.begin().await.unwrap();
    write("five", 2).execute(&mut *tx5).await.unwrap();
    let f5 = dlock_sql::fence::fence_postgres(&mut tx5, "dlock_locks", &r, t(5)).await;
    assert!(is_stale(&f5, Some(7), 5), "{f5:?}");
    tx5.rollback().await.unwrap();
    let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT v FROM {demo} ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows, ["seven"]);
    // the one-statement form on your own table
    let upd = |tok: i64| {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {demo} SET v = 'updated', fence = $1 WHERE id = 1 AND fence <= $1"
        )))
        .bind(tok)
    };
    let done = upd(8).execute(&pool).await.unwrap().rows_affected();
    updated_or_stale(done, "demo/1", t(8)).unwrap();
    let late = upd(3).execute(&pool).await.unwrap().rows_affected();
    assert!(is_stale(&updated_or_stale(late, "demo/1", t(3)), None, 3));
    // an unlocked run's DLOCK_TOKEN=0: refused before the update, and by the row count
    assert!(is_stale(
        &dlock_sql::fence::bind_token("demo/2", t(0)).map(|_| ()),
        None,
        0
    ));
    assert!(is_stale(&updated_or_stale(1, "demo/2", t(0)), None, 0));
    assert_eq!(mark!(&pool, &r), 7, "a refused token never lowers the mark");
    common::raw_execute(&url, &format!("DROP TABLE {demo}")).await;
}

/// Behind PgBouncer in transaction mode each transaction may run on another server
/// connection, one another client used a moment before: a fence in the caller's
/// transaction must not lean on a statement prepared in an earlier one. Two clients
/// take turns (PgBouncer hands each the server connection the other just left), and
/// every fence answers as the marks say — never "prepared statement … already exists"
/// or "does not exist".
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_fence_in_a_transaction() {
    // the lock through the pooler, as dlock is told to run there; the application's
    // pool goes through it too (plain URL: sqlx knows no `pooler=`)
    let lock_url = pgbouncer_url();
    trait_fence(&lock_url).await;
    let plain = lock_url.split('?').next().unwrap();
    let options: sqlx::postgres::PgConnectOptions = plain.parse().unwrap();
    // a stock PgBouncer refuses the parameter sqlx sends by default
    let options = options.extra_float_digits(None);
    let one = || {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
    };
    let (a, b) = (one().await.unwrap(), one().await.unwrap());
    let r = resource();
    for round in 1..=10_u64 {
        for (pool, offset) in [(&a, 0), (&b, 1)] {
            let token = 2 * round + offset;
            let mut tx = pool.begin().await.unwrap();
            dlock_sql::fence::fence_postgres_unprepared(&mut tx, "dlock_locks", &r, t(token))
                .await
                .unwrap_or_else(|e| panic!("round {round}, token {token}: {e:?}"));
            tx.commit().await.unwrap();
            // the token just below the mark is refused, on the other client
            let other = if offset == 0 { &b } else { &a };
            let mut tx = other.begin().await.unwrap();
            let stale = dlock_sql::fence::fence_postgres_unprepared(
                &mut tx,
                "dlock_locks",
                &r,
                t(token - 1),
            )
            .await;
            assert!(is_stale(&stale, Some(token), token - 1), "{stale:?}");
            tx.rollback().await.unwrap();
        }
    }
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_fence() {
    let url = mysql_url();
    trait_fence(&url).await;
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let demo = format!("fence_demo_{:x}", random_u64() >> 8);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {demo} (id BIGINT PRIMARY KEY, v TEXT NOT NULL, fence BIGINT NOT NULL) ENGINE=InnoDB"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let r = resource();
    let mut tx7 = pool.begin().await.unwrap();
    dlock_sql::fence::fence_mysql(&mut tx7, "dlock_locks", &r, t(7))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {demo} (id, v, fence) VALUES (1, 'seven', 0)"
    )))
    .execute(&mut *tx7)
    .await
    .unwrap();
    lower_token_waits_then_is_refused!(pool, tx7, r, dlock_sql::fence::fence_mysql);
    let mut tx5 = pool.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {demo} (id, v, fence) VALUES (2, 'five', 0)"
    )))
    .execute(&mut *tx5)
    .await
    .unwrap();
    let f5 = dlock_sql::fence::fence_mysql(&mut tx5, "dlock_locks", &r, t(5)).await;
    assert!(is_stale(&f5, Some(7), 5), "{f5:?}");
    tx5.rollback().await.unwrap();
    let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT v FROM {demo} ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows, ["seven"]);
    // a transaction that read (and so took its snapshot) before a higher holder
    // committed must still see that holder's mark when it fences
    let mut tx8 = pool.begin().await.unwrap();
    let _: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {demo}")))
        .fetch_one(&mut *tx8)
        .await
        .unwrap();
    let mut tx9 = pool.begin().await.unwrap();
    dlock_sql::fence::fence_mysql(&mut tx9, "dlock_locks", &r, t(9))
        .await
        .unwrap();
    tx9.commit().await.unwrap();
    let f8 = dlock_sql::fence::fence_mysql(&mut tx8, "dlock_locks", &r, t(8)).await;
    assert!(is_stale(&f8, Some(9), 8), "{f8:?}");
    tx8.rollback().await.unwrap();
    assert_eq!(mark!(&pool, &r), 9, "a refused token never lowers the mark");
    common::raw_execute(&url, &format!("DROP TABLE {demo}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fence() {
    let url = sqlite_url();
    trait_fence(&url).await; // creates the file and the tables
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query(
        "CREATE TABLE demo (id INTEGER PRIMARY KEY, v TEXT NOT NULL, fence INTEGER NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let r = resource();
    let mut tx7 = pool.begin().await.unwrap();
    dlock_sql::fence::fence_sqlite(&mut tx7, "dlock_locks", &r, t(7))
        .await
        .unwrap();
    sqlx::query("INSERT INTO demo (id, v, fence) VALUES (1, 'seven', 0)")
        .execute(&mut *tx7)
        .await
        .unwrap();
    tx7.commit().await.unwrap();
    let mut tx5 = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO demo (id, v, fence) VALUES (2, 'five', 0)")
        .execute(&mut *tx5)
        .await
        .unwrap();
    let f5 = dlock_sql::fence::fence_sqlite(&mut tx5, "dlock_locks", &r, t(5)).await;
    assert!(is_stale(&f5, Some(7), 5), "{f5:?}");
    tx5.rollback().await.unwrap();
    let rows: Vec<String> = sqlx::query_scalar("SELECT v FROM demo ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(rows, ["seven"]);
    let upd = |tok: i64| {
        sqlx::query("UPDATE demo SET v = 'updated', fence = ?1 WHERE id = 1 AND fence <= ?1")
            .bind(tok)
    };
    updated_or_stale(
        upd(8).execute(&pool).await.unwrap().rows_affected(),
        "demo/1",
        t(8),
    )
    .unwrap();
    let late = upd(3).execute(&pool).await.unwrap().rows_affected();
    assert!(is_stale(&updated_or_stale(late, "demo/1", t(3)), None, 3));
    // an unlocked run's DLOCK_TOKEN=0: refused before the update, and by the row count
    assert!(is_stale(
        &dlock_sql::fence::bind_token("demo/2", t(0)).map(|_| ()),
        None,
        0
    ));
    assert!(is_stale(&updated_or_stale(1, "demo/2", t(0)), None, 0));
}
