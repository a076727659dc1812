//! What PostgreSQL adds: waiters woken by `NOTIFY`, a LISTEN that leaves a one-connection
//! pool to the holder, a lost LISTEN connection that wakes waiters once back, killed
//! connections replaced.

use std::time::{Duration, Instant};

use dlock_conformance::take;
use dlock_core::DistributedLock;
use dlock_sql::SqlLock;

use super::{LONG, name};
use crate::common;

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
        let held = take(&holder, &n, LONG).await;
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
    let held = take(&lock, &n, LONG).await;
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
    let held = take(&holder, &n, LONG).await;
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
    let lease = take(&lock, &n, LONG).await;
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
