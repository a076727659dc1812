//! What the SQL backend promises beyond the shared suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlock_core::{DistributedLock, LockError, LockName, random_u64};
use dlock_sql::SqlLock;

fn name(case: &str) -> LockName {
    LockName::new(&format!("sql/{case}/{:016x}", random_u64())).unwrap()
}

const LONG: Duration = Duration::from_secs(30);

/// Moves a lock row's expiry, as the database's own clock sees it, by `offset_ms`.
async fn shift_expiry(url: &str, table: &str, lock: &LockName, offset_ms: i64) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET expires_at = clock_timestamp() + $2 * interval '1 millisecond' WHERE name = $1"
        )))
        .bind(lock.as_str())
        .bind(offset_ms)
        .execute(&pool)
        .await
        .unwrap();
    } else if url.starts_with("mysql") {
        let pool = sqlx::MySqlPool::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = ?"
        )))
        .bind(offset_ms * 1000)
        .bind(lock.as_str().as_bytes())
        .execute(&pool)
        .await
        .unwrap();
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?2 WHERE name = ?1"
        )))
        .bind(lock.as_str())
        .bind(offset_ms)
        .execute(&pool)
        .await
        .unwrap();
    }
}

/// Expiry is decided by the database clock: a row the database considers expired is
/// taken even though the holder's client still trusts its lease, and a row the
/// database considers live is not taken even after the client-side TTL has passed.
async fn database_clock_decides(url: &str) {
    let a = common::connect(url).await;
    let b = common::connect(url).await;
    let n = name("clock");
    let lease = a.try_acquire(&n, LONG).await.unwrap().unwrap();
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
    let held = a.try_acquire(&n, short).await.unwrap().unwrap();
    shift_expiry(url, "dlock_locks", &n, 3_600_000).await;
    tokio::time::sleep(short * 3).await;
    assert!(!held.is_valid(), "the client-side lease has run out");
    assert!(
        b.try_acquire(&n, LONG).await.unwrap().is_none(),
        "the database still says held: the client's elapsed time must not matter"
    );
    shift_expiry(url, "dlock_locks", &n, -1).await;
}

#[tokio::test]
async fn postgres_database_clock_decides_expiry() {
    database_clock_decides(&common::postgres_url()).await;
}

#[tokio::test]
async fn mysql_database_clock_decides_expiry() {
    database_clock_decides(&common::mysql_url()).await;
}

#[tokio::test]
async fn sqlite_database_clock_decides_expiry() {
    database_clock_decides(&common::sqlite_url()).await;
}

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
#[tokio::test]
async fn custom_table_is_created_and_used() {
    for url in [
        common::postgres_url(),
        common::mysql_url(),
        common::sqlite_url(),
    ] {
        let table = format!("dlock_custom_{:08x}", random_u64() as u32);
        let sep = if url.contains('?') { '&' } else { '?' };
        let lock = SqlLock::connect(&format!("{url}{sep}table={table}"))
            .await
            .unwrap();
        let n = name("custom");
        let lease = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
        let other = SqlLock::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        assert!(
            other.try_acquire(&n, LONG).await.unwrap().is_none(),
            "{}",
            lock.database()
        );
        let default_table = SqlLock::connect(&url).await.unwrap();
        assert!(
            default_table.try_acquire(&n, LONG).await.unwrap().is_some(),
            "tables are separate"
        );
        assert!(lock.release(&lease).await.unwrap());
    }
}

/// Several processes starting at once on a fresh table all succeed.
#[tokio::test]
async fn concurrent_first_connects_create_the_table_once() {
    for url in [
        common::postgres_url(),
        common::mysql_url(),
        common::sqlite_url(),
    ] {
        let table = format!("dlock_race_{:08x}", random_u64() as u32);
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let (url, table) = (url.clone(), table.clone());
                tokio::spawn(async move { SqlLock::builder(&url).table(&table).connect().await })
            })
            .collect();
        for t in tasks {
            let lock = t.await.unwrap().unwrap_or_else(|e| panic!("{url}: {e}"));
            assert!(lock.inspect(&name("race")).await.unwrap().is_none());
        }
    }
}

#[tokio::test]
async fn connect_errors_are_typed_and_hide_passwords() {
    let r = SqlLock::connect("ftp://u:hunter2@h/x").await;
    let e = r.unwrap_err();
    assert!(matches!(e, LockError::Config(_)), "{e:?}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    // nothing listens on port 1
    let t = Instant::now();
    let e = SqlLock::builder("postgres://u:hunter2@127.0.0.1:1/db")
        .op_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Unavailable { .. }), "{e:?}");
    assert!(!e.to_string().contains("hunter2") && !format!("{e:?}").contains("hunter2"));
    assert!(t.elapsed() < Duration::from_secs(10));
    let e = SqlLock::connect("mysql://u:hunter2@127.0.0.1:1/db?pool_size=zero")
        .await
        .unwrap_err();
    assert!(
        matches!(e, LockError::Config(_)) && !e.to_string().contains("hunter2"),
        "{e}"
    );
    let e = SqlLock::connect("postgres://u:pw@127.0.0.1:1/db?op_timeout=never")
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Config(_)), "{e}");
}

/// A PostgreSQL waiter is woken by NOTIFY: with its polling fallback set to 20 s and
/// the holder's lease 30 s long, only the notification can hand it the lock quickly.
#[tokio::test]
async fn postgres_waiter_is_woken_by_notify() {
    let url = common::postgres_url();
    let holder = common::connect(&url).await;
    let waiter = SqlLock::builder(&url)
        .notify_fallback(Duration::from_secs(20))
        .connect()
        .await
        .unwrap();
    assert!(waiter.capabilities().notify);
    let n = name("notify");
    for _ in 0..3 {
        let held = holder.try_acquire(&n, LONG).await.unwrap().unwrap();
        let w = {
            let (waiter, n) = (waiter.clone(), n.clone());
            tokio::spawn(async move {
                let l = waiter.acquire(&n, LONG, Duration::from_secs(25)).await;
                (l, Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released = Instant::now();
        assert!(holder.release(&held).await.unwrap());
        let (lease, at) = w.await.unwrap();
        let lease = lease.unwrap();
        let latency = at.duration_since(released);
        assert!(
            latency < Duration::from_secs(2),
            "woken after {latency:?}: not by NOTIFY"
        );
        assert!(waiter.release(&lease).await.unwrap());
    }
}

/// A database locked by another writer: operations give up with `Unavailable` after
/// the operation timeout, and work again once the other writer commits.
#[tokio::test]
async fn sqlite_busy_database_gives_unavailable_then_recovers() {
    let url = common::sqlite_url();
    let lock = SqlLock::builder(&url)
        .op_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let n = name("busy");
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let mut blocker = pool.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *blocker)
        .await
        .unwrap();
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
    let lease = lock
        .try_acquire(&n, LONG)
        .await
        .unwrap()
        .expect("free after the writer left");
    assert!(lock.release(&lease).await.unwrap());
}

/// `acquire` keeps waiting through transient errors and reports the outage (not a
/// timeout) if the database stays away for the whole wait.
#[tokio::test]
async fn sqlite_acquire_reports_outage_not_timeout() {
    let url = common::sqlite_url();
    let lock = SqlLock::builder(&url)
        .op_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let mut blocker = pool.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let r = lock
        .acquire(&name("outage"), LONG, Duration::from_millis(600))
        .await;
    assert!(matches!(r, Err(LockError::Unavailable { .. })), "{r:?}");
    sqlx::query("COMMIT").execute(&mut *blocker).await.unwrap();
}

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

/// An acquire whose first statement commits after the client gave up on its reply
/// takes that row again on its next attempt (same owner id) instead of waiting a whole
/// TTL behind itself.
async fn late_grant_is_taken_again(url: &str) {
    let target = dlock_conformance::url_host_port(url).unwrap();
    let proxy = dlock_conformance::FaultProxy::start(&target).await.unwrap();
    let timeout = Duration::from_millis(400);
    let late = SqlLock::builder(&dlock_conformance::url_with_host_port(
        url,
        &proxy.addr().to_string(),
    ))
    .op_timeout(timeout)
    .connect()
    .await
    .unwrap();
    let observer = common::connect(url).await;
    dlock_conformance::late_grant_is_taken_again(
        Arc::new(late),
        Arc::new(observer),
        &proxy,
        timeout,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_late_grant_is_taken_again() {
    late_grant_is_taken_again(&common::postgres_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_late_grant_is_taken_again() {
    late_grant_is_taken_again(&common::mysql_url()).await;
}

/// With a pool of one connection, a waiter's LISTEN must not take the only connection:
/// the holder (same client) still renews and releases, and the waiter gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_waiter_does_not_starve_a_one_connection_pool() {
    let lock = SqlLock::builder(&common::postgres_url())
        .pool_size(1)
        .op_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    let n = name("pool-of-one");
    let held = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
    let w = {
        let (lock, n) = (lock.clone(), n.clone());
        tokio::spawn(async move { lock.acquire(&n, LONG, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let renewed = lock
        .renew(&held)
        .await
        .expect("the holder renews while a waiter listens");
    assert!(lock.release(&renewed).await.expect("and releases"));
    let lease = tokio::time::timeout(Duration::from_secs(5), w)
        .await
        .expect("the waiter is handed the lock")
        .unwrap()
        .unwrap();
    assert!(lease.token() > held.token());
    assert!(lock.release(&lease).await.unwrap());
}

/// A release whose notification was lost while the LISTEN connection was down: once
/// the listener is back, every waiter looks again, instead of sleeping until its 20 s
/// fallback. The release is made silent (the row expired by hand, no NOTIFY), then the
/// listener's connection is terminated by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_listener_reconnect_wakes_waiters() {
    let url = common::postgres_url();
    let holder = common::connect(&url).await;
    let sep = if url.contains('?') { '&' } else { '?' };
    let waiter = SqlLock::builder(&format!("{url}{sep}application_name=dlock-reconnect-test"))
        .notify_fallback(Duration::from_secs(20))
        .connect()
        .await
        .unwrap();
    let n = name("listener-reconnect");
    let held = holder.try_acquire(&n, LONG).await.unwrap().unwrap();
    let w = {
        let (waiter, n) = (waiter.clone(), n.clone());
        tokio::spawn(async move { waiter.acquire(&n, LONG, Duration::from_secs(25)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE dlock_locks SET expires_at = clock_timestamp() WHERE name = $1")
        .bind(n.as_str())
        .execute(&pool)
        .await
        .unwrap();
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = 'dlock-reconnect-test' AND query LIKE 'LISTEN%') t",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(killed, 1, "the waiter's LISTEN connection");
    let at = Instant::now();
    let lease = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .expect("the waiter looked again after the listener came back")
        .unwrap()
        .unwrap();
    assert!(
        at.elapsed() < Duration::from_secs(5),
        "woken after {:?}",
        at.elapsed()
    );
    assert!(lease.token() > held.token());
    assert!(waiter.release(&lease).await.unwrap());
}

/// The connection kept out of the pool for single statements, killed by the server
/// with the pool's: the dead ones fail a call or two each (a transient error: sqlx's
/// pool keeps a killed connection until it met the server's goodbye and then the
/// closed socket; the hot one is dropped at the first) and are replaced, so calls
/// recover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_hot_connection_is_replaced() {
    let url = common::postgres_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let lock = SqlLock::builder(&format!("{url}{sep}application_name=dlock-hot-test"))
        .connect()
        .await
        .unwrap();
    let n = name("hot-connection");
    let lease = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
    assert!(lock.release(&lease).await.unwrap());

    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = 'dlock-hot-test') t",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(killed >= 1, "the lock's connections");

    let mut outcomes = Vec::new();
    for _ in 0..12 {
        match lock.try_acquire(&n, LONG).await {
            Ok(Some(lease)) => {
                assert!(lock.release(&lease).await.unwrap());
                outcomes.push(true);
            }
            Ok(None) => panic!("nobody else holds {n}"),
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                outcomes.push(false);
            }
        }
    }
    let failures = outcomes.iter().filter(|ok| !**ok).count();
    assert!(
        i64::try_from(failures).unwrap() < 2 * killed,
        "{failures} calls failed for {killed} dead connections: {outcomes:?}"
    );
    assert!(
        outcomes[9..].iter().all(|ok| *ok),
        "recovered: {outcomes:?}"
    );
}
