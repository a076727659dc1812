//! The SQL harness shared by the three databases' suites.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{
    FaultProxy, Harness, Link, TestClient, Timings, required_env, switched_client, url_host_port,
};
use dlock_core::{async_trait, random_u64};
use dlock_sql::SqlLock;

pub struct SqlHarness {
    pub url: String,
}

/// Server URLs come from scripts/services; each SQLite harness gets its own file.
pub fn postgres_url() -> String {
    required_env("DLOCK_TEST_POSTGRES_URL")
}
/// PostgreSQL through PgBouncer in transaction mode, as dlock is told to run there.
pub fn pgbouncer_url() -> String {
    let url = required_env("DLOCK_TEST_PGBOUNCER_URL");
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}pooler=transaction")
}
pub fn mysql_url() -> String {
    required_env("DLOCK_TEST_MYSQL_URL")
}
pub fn sqlite_url() -> String {
    let dir = std::env::temp_dir().join("dlock-sql-tests");
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite://{}/t-{:016x}.sqlite", dir.display(), random_u64())
}

/// The URL of the test database `db` (`postgres`, `pgbouncer`, `mysql`, `sqlite`).
pub fn url_of(db: &str) -> String {
    match db {
        "postgres" => postgres_url(),
        "pgbouncer" => pgbouncer_url(),
        "mysql" => mysql_url(),
        "sqlite" => sqlite_url(),
        other => panic!("no test database {other}"),
    }
}

/// For `case` (an `async fn(&str)` taking a database URL), a module of the same name
/// with one test per listed database: `on_databases!(case: postgres, mysql)`.
#[allow(unused_macros)] // not every test binary fans a case out
macro_rules! on_databases {
    ($case:ident: $($db:ident),+) => {
        mod $case {
            $($crate::common::on_databases!(@test $case, $db);)+
        }
    };
    (@test $case:ident, sqlite) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn sqlite() {
            super::$case(&$crate::common::url_of("sqlite")).await;
        }
    };
    (@test $case:ident, $db:ident) => {
        #[cfg(feature = "server-tests")]
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $db() {
            super::$case(&$crate::common::url_of(stringify!($db))).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_databases;

/// Runs `sql` (one or more statements) on the database of `url`, dlock's own URL
/// parameters left out, on a connection of its own (SQLite: creating the file).
pub async fn raw_execute(url: &str, sql: &str) {
    use sqlx::Connection;
    let raw = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()));
    let url = url.split('?').next().unwrap();
    match url.split(':').next() {
        Some("postgres") => {
            // (no startup parameter PgBouncer would refuse)
            let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
            let options = options.extra_float_digits(None);
            let mut c = sqlx::PgConnection::connect_with(&options).await.unwrap();
            raw.execute(&mut c).await.unwrap();
        }
        Some("mysql") => {
            let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
            raw.execute(&mut c).await.unwrap();
        }
        _ => {
            let create = format!("{url}?mode=rwc");
            let mut c = sqlx::SqliteConnection::connect(&create).await.unwrap();
            raw.execute(&mut c).await.unwrap();
        }
    }
}

/// Waiters acquiring one name, started 150 ms apart (see [`queue_waiters`]).
pub struct QueuedWaiters {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    order: Arc<tokio::sync::Mutex<Vec<usize>>>,
}

/// Starts one waiter per client on `name`, 150 ms apart; each holds the lock 20 ms
/// once it gets it.
pub async fn queue_waiters(clients: Vec<SqlLock>, name: &dlock_core::LockName) -> QueuedWaiters {
    use dlock_core::DistributedLock;
    const LONG: Duration = Duration::from_secs(30);
    let order = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, c) in clients.into_iter().enumerate() {
        let (name, order) = (name.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let lease = c.acquire(&name, LONG, LONG).await.expect("waiter acquires");
            order.lock().await.push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(c.release(&lease).await.unwrap());
        }));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    QueuedWaiters { tasks, order }
}

impl QueuedWaiters {
    /// Waits for every waiter; the order in which they got the lock.
    pub async fn order(self) -> Vec<usize> {
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("waiter finished")
                .unwrap();
        }
        self.order.lock().await.clone()
    }
}

pub async fn connect(url: &str) -> SqlLock {
    // A short operation timeout makes a cut network path fail fast. SQLite has none to
    // cut, and its writers wait their turn for the file's one write lock without any
    // fairness: under a busy workload on a loaded two-core machine one can wait past
    // a second and a half, so it keeps the default.
    let op_timeout = if url.starts_with("sqlite") {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(2)
    };
    SqlLock::builder(url)
        .op_timeout(op_timeout)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", dlock_core::redact_url(url)))
}

/// `N` locks on the database of `url`, each with its own pool (as separate processes).
pub async fn connect_n<const N: usize>(url: &str) -> [SqlLock; N] {
    let mut locks = Vec::with_capacity(N);
    for _ in 0..N {
        locks.push(connect(url).await);
    }
    locks
        .try_into()
        .unwrap_or_else(|_| unreachable!("exactly N locks were made"))
}

#[async_trait]
impl Harness for SqlHarness {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(connect(&self.url).await))
    }

    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        match url_host_port(&self.url) {
            Some(_) if !self.url.starts_with("sqlite") => {
                let (proxy, through) = FaultProxy::in_front_of(&self.url).await;
                TestClient::behind(proxy, Arc::new(connect(&through).await))
            }
            // An embedded database has no network path to cut; the busy-database test
            // in sqlite.rs covers its real failure mode.
            _ => switched_client(Arc::new(connect(&self.url).await)),
        }
    }

    fn timings(&self) -> Timings {
        Timings::millis(500, 100, 25)
    }
}
