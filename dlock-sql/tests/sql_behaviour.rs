//! What the SQL backend promises beyond the shared suite.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

// The parts of this one test binary live in tests/sql_behaviour/ (a crate root looks for
// `mod x;` beside itself, hence the `#[path]`s).
#[path = "sql_behaviour/clock.rs"]
mod clock;
#[path = "sql_behaviour/outages.rs"]
mod outages;
#[cfg(feature = "server-tests")]
#[path = "sql_behaviour/postgres.rs"]
mod postgres;
#[path = "sql_behaviour/setup.rs"]
mod setup;

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, LockName, random_u64};
use dlock_sql::SqlLock;

fn name(case: &str) -> LockName {
    LockName::new(&format!("sql/{case}/{:016x}", random_u64())).unwrap()
}

const LONG: Duration = Duration::from_secs(30);

// These two stay at the crate root: the test starts this binary again with
// `--exact sqlite_counter_worker`, which names the worker by its full path.

/// Many processes on one SQLite file (each a separate OS process running this test
/// binary's worker) share a counter under the lock: zero overlap, exact total.
#[tokio::test]
async fn sqlite_two_processes_share_a_counter() {
    const PROCS: usize = 2;
    const ITERS: usize = 40;
    let url = common::sqlite_url();
    let path = url.trim_start_matches("sqlite://").to_owned();
    let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=rwc"))
        .await
        .unwrap();
    sqlx::query("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL, last_token INTEGER NOT NULL, inside INTEGER NOT NULL, overlaps INTEGER NOT NULL, stale INTEGER NOT NULL)")
        .execute(&pool).await.unwrap();
    sqlx::query("INSERT INTO counter VALUES (1, 0, 0, 0, 0, 0)")
        .execute(&pool)
        .await
        .unwrap();
    drop(pool);
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCS)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "sqlite_counter_worker",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("DLOCK_SQLITE_WORKER_DB", &path)
                .env("DLOCK_SQLITE_WORKER_ITERS", ITERS.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "worker failed: {status}");
    }
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let (value, overlaps, stale): (i64, i64, i64) =
        sqlx::query_as("SELECT value, overlaps, stale FROM counter WHERE id = 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(overlaps, 0, "critical sections overlapped across processes");
    assert_eq!(stale, 0, "a token went backwards");
    assert_eq!(value, (PROCS * ITERS) as i64, "increments were lost");
}

/// The worker half of `sqlite_two_processes_share_a_counter`; run in a child process.
/// Run directly it only checks that no worker database was given.
#[tokio::test]
async fn sqlite_counter_worker() {
    let Ok(path) = std::env::var("DLOCK_SQLITE_WORKER_DB") else {
        assert!(std::env::var("DLOCK_SQLITE_WORKER_ITERS").is_err());
        return;
    };
    let iters: usize = std::env::var("DLOCK_SQLITE_WORKER_ITERS")
        .unwrap()
        .parse()
        .unwrap();
    let url = format!("sqlite://{path}");
    let lock = Arc::new(SqlLock::connect(&url).await.unwrap());
    let data = sqlx::SqlitePool::connect(&url).await.unwrap();
    let n = LockName::new("sql/two-processes").unwrap();
    for _ in 0..iters {
        let lease = lock
            .acquire(&n, LONG, Duration::from_secs(60))
            .await
            .unwrap();
        // enter: flag an overlap if another process is inside
        sqlx::query("UPDATE counter SET overlaps = overlaps + inside, inside = 1 WHERE id = 1")
            .execute(&data)
            .await
            .unwrap();
        let (value,): (i64,) = sqlx::query_as("SELECT value FROM counter WHERE id = 1")
            .fetch_one(&data)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let token = i64::try_from(lease.token().get()).unwrap();
        sqlx::query("UPDATE counter SET stale = stale + (last_token > ?2), value = ?1, last_token = MAX(last_token, ?2), inside = 0 WHERE id = 1")
            .bind(value + 1).bind(token).execute(&data).await.unwrap();
        assert!(lock.release(&lease).await.unwrap());
    }
}
