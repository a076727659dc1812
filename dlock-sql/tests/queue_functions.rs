//! PostgreSQL runs the queue's transactions as server-side functions, one call each
//! (issue #34.2). A schema made by hand without them must still queue, in order,
//! through the transactions the other databases run: these cases drop the functions
//! and connect without creating anything.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::{take, unique_name};
use dlock_core::{DistributedLock, random_u64};
use dlock_sql::SqlLock;
use sqlx::Connection;
use tokio::time::{sleep, timeout};

const LONG: Duration = Duration::from_secs(30);

/// A table of its own, created with its functions, then the functions dropped: the
/// URL to connect to it with.
async fn table_without_functions() -> String {
    let url = common::postgres_url();
    let table = format!("dlock_nofn_{:08x}", random_u64() as u32);
    let sep = if url.contains('?') { '&' } else { '?' };
    let with_table = format!("{url}{sep}table={table}");
    drop(common::connect(&with_table).await);
    let plain = url.split('?').next().unwrap();
    let mut c = sqlx::PgConnection::connect(plain).await.unwrap();
    let functions = ["qtake1", "qgrant1", "qrelease1", "qgive1"].map(|f| format!("{table}_{f}"));
    let drop_them = format!("DROP FUNCTION {}", functions.join(", "));
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop_them))
        .execute(&mut c)
        .await
        .unwrap();
    with_table
}

async fn connect_without_creating(url: &str) -> SqlLock {
    SqlLock::builder(url)
        .op_timeout(Duration::from_secs(2))
        .create_table(false)
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_functions_a_table_still_queues_in_order_and_grants() {
    const WAITERS: usize = 4;
    let url = table_without_functions().await;
    let holder = connect_without_creating(&url).await;
    let name = unique_name("queue/nofn");
    let held = take(&holder, &name, LONG).await;
    let mut clients = Vec::new();
    for _ in 0..WAITERS {
        clients.push(connect_without_creating(&url).await);
    }
    let waiters = common::queue_waiters(clients, &name).await;
    assert!(holder.release(&held).await.unwrap());
    let granted = holder.inspect(&name).await.unwrap();
    assert!(
        granted.is_some_and(|g| g.token > held.token()),
        "the release granted the lock to the first waiter"
    );
    assert_eq!(waiters.order().await, (0..WAITERS).collect::<Vec<_>>());
}

/// A waiter whose LISTEN connection is cut while it is queued registers its new
/// connection with its next attempt (its old entry names a connection that is gone,
/// which a release passes over): the release after the reconnect grants to it at once,
/// not at its next heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_listen_connection_was_cut_is_granted_after_it_reconnects() {
    let url = common::postgres_url();
    let app = format!("dlock_cut_{:08x}", random_u64() as u32);
    let sep = if url.contains('?') { '&' } else { '?' };
    let waiter_url = format!("{url}{sep}application_name={app}");
    let holder = common::connect(&url).await;
    let waiter = common::connect(&waiter_url).await;
    let name = unique_name("queue/cut");
    let held = take(&holder, &name, LONG).await;
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { waiter.acquire(&name, LONG, LONG).await.map(|l| (waiter, l)) })
    };
    sleep(Duration::from_millis(300)).await;
    common::raw_execute(
        &url,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = '{app}' AND query LIKE 'LISTEN%'"
        ),
    )
    .await;
    // the listener reconnects (200 ms) and the waiter looks again
    sleep(Duration::from_millis(1500)).await;
    assert!(holder.release(&held).await.unwrap());
    let released = tokio::time::Instant::now();
    let (waiter, lease) = timeout(LONG, waiting).await.unwrap().unwrap().unwrap();
    assert!(
        released.elapsed() < Duration::from_millis(2500),
        "granted at the release, not at a heartbeat: {:?}",
        released.elapsed()
    );
    assert!(waiter.release(&lease).await.unwrap());
}
