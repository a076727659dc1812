//! # dlock-sql
//!
//! A [`DistributedLock`](dlock_core::DistributedLock) on a SQL database: PostgreSQL, MySQL/MariaDB or SQLite, each
//! behind its own cargo feature (all on by default).
//!
//! One row per lock name holds the owner, the fencing token and the expiry. Every
//! operation is **one statement** that decides by the **database's clock**, never the
//! client's:
//! - acquire: an upsert that takes the row when it is free or expired, its token
//!   becoming `max(token + 1, database clock in µs)` (PostgreSQL and SQLite
//!   `ON CONFLICT … DO UPDATE … WHERE … RETURNING`; MySQL `ON DUPLICATE KEY UPDATE`
//!   with `LAST_INSERT_ID(expr)`);
//! - renew and release: owner- and token-checked `UPDATE`s. Release expires the row
//!   instead of deleting it, so the token never goes back. A new row's first token is
//!   the database clock in microseconds, so [`SqlLock::prune`] can delete the rows of
//!   long-idle names and a name created again still starts above its old tokens; and
//!   since every grant takes at least the clock, a failover to a standby that missed
//!   the last grants cannot repeat a token either (while the clock does not step back).
//!
//! On PostgreSQL waiters queue in a table beside it, oldest first, and a release
//! **grants** the lock to the oldest live waiter — writes it as the holder with the
//! next token — and tells it alone on its own `LISTEN` channel: no attempt races for
//! it, no newcomer passes the queue (FIFO, as on etcd and ZooKeeper), one
//! notification per hand-off whatever the number of waiters. Semaphores and
//! read-write locks queue the same way (writer preference falls out of FIFO). On
//! MySQL and SQLite waiters poll with jittered backoff capped by the holder's
//! remaining time, and the first to look after a release gets it — unless `fifo=true`
//! ([`SqlLockBuilder::fifo`]) queues them too, and each finds its grant at its next
//! poll. A poller is not starved by a client that releases and asks again at once:
//! after ten polling gaps (1 s by default) it joins the queue, and the next release
//! grants it the lock. No session state is relied on, so the lock works behind a
//! transaction-mode pooler such as PgBouncer: add `pooler=transaction` to the URL
//! ([`SqlLockBuilder::transaction_pooler`]), and each statement runs unprepared in a
//! transaction of its own while waiters poll (`LISTEN` needs a session).
//!
//! ```no_run
//! use std::time::Duration;
//! use dlock_core::{DistributedLock, LockName};
//! use dlock_sql::SqlLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = SqlLock::connect("sqlite:///var/lib/myapp/locks.db").await?;
//! let name = LockName::new("nightly-report")?;
//! if let Some(lease) = locks.try_acquire(&name, Duration::from_secs(60)).await? {
//!     println!("got it, token {}", lease.token());
//!     locks.release(&lease).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! The table (created on first connect unless [`SqlLockBuilder::create_table`] is
//! `false`); the DDL for teams that manage schemas themselves:
//!
//! ```sql
//! -- PostgreSQL
//! CREATE TABLE dlock_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
//!   token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
//!   queued_until BIGINT NOT NULL DEFAULT 0);
//! CREATE TABLE dlock_locks_queue (name TEXT NOT NULL, owner TEXT NOT NULL,
//!   seq BIGINT NOT NULL, access TEXT NOT NULL, permits BIGINT NOT NULL,
//!   ttl_ms BIGINT NOT NULL, deadline BIGINT NOT NULL,
//!   listener BIGINT NOT NULL DEFAULT 0, channel TEXT NOT NULL DEFAULT '',
//!   PRIMARY KEY (name, owner));
//! CREATE INDEX dlock_locks_qseq ON dlock_locks_queue (name, seq);
//! -- MySQL / MariaDB
//! CREATE TABLE dlock_locks (name VARBINARY(256) NOT NULL PRIMARY KEY,
//!   owner VARCHAR(255) CHARACTER SET ascii NOT NULL, token BIGINT NOT NULL,
//!   expires_at DATETIME(6) NOT NULL, queued_until BIGINT NOT NULL DEFAULT 0)
//!   ENGINE=InnoDB;
//! CREATE TABLE dlock_locks_queue (name VARBINARY(300) NOT NULL,
//!   owner VARCHAR(255) CHARACTER SET ascii NOT NULL, seq BIGINT NOT NULL,
//!   access VARCHAR(8) CHARACTER SET ascii NOT NULL, permits BIGINT NOT NULL,
//!   ttl_ms BIGINT NOT NULL, deadline BIGINT NOT NULL, listener BIGINT NOT NULL DEFAULT 0,
//!   channel VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '',
//!   PRIMARY KEY (name, owner), KEY dlock_locks_qseq (name, seq)) ENGINE=InnoDB;
//! -- SQLite
//! CREATE TABLE dlock_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
//!   token INTEGER NOT NULL, expires_at INTEGER NOT NULL,  -- unix ms
//!   queued_until INTEGER NOT NULL DEFAULT 0) STRICT;
//! CREATE TABLE dlock_locks_queue (name TEXT NOT NULL, owner TEXT NOT NULL,
//!   seq INTEGER NOT NULL, access TEXT NOT NULL, permits INTEGER NOT NULL,
//!   ttl_ms INTEGER NOT NULL, deadline INTEGER NOT NULL,
//!   listener INTEGER NOT NULL DEFAULT 0, channel TEXT NOT NULL DEFAULT '',
//!   PRIMARY KEY (name, owner)) STRICT;
//! CREATE INDEX dlock_locks_qseq ON dlock_locks_queue (name, seq);
//! ```
//!
//! On PostgreSQL, `migrate` also creates the queue's functions (`<table>_qtake1`,
//! `_qgrant1`, `_qrelease1`, `_qgive1`: a waiter's attempt, a grant and a release that
//! grants, one round trip each); a schema made without them still queues, through
//! transactions of several statements.
//!
//! (`queued_until`, the latest deadline of the name's waiters in database-clock ms, is
//! added on connect to a lock table made by an earlier version. The semaphore,
//! read-write lock, fence, idempotency and holder-value tables are created the same
//! way; see the crate's `migrate` statements.)
//!
//! URL query parameters read by dlock (the rest go to sqlx): `table`, `pool_size`,
//! `op_timeout` (e.g. `2s`), `poll_max` (e.g. `100ms`), `listen` (`true`/`false`),
//! `fifo` (`true`/`false`: see [`SqlLockBuilder::fifo`]).

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
compile_error!("dlock-sql needs at least one of the features postgres, mysql, sqlite");

mod builder;
mod doctor;
mod errors;
pub mod fence;
mod hot;
#[cfg(feature = "postgres")]
mod listen;
mod lock;
#[macro_use]
mod values;
#[macro_use]
pub mod results;
#[macro_use]
mod shared;
#[macro_use]
mod queue;

/// The parts of a dialect's store written once for every dialect (semaphores and
/// read-write locks, their grants, the queue, idempotency results, proclaimed values).
macro_rules! dialect_parts {
    ($store:ident, $pool:ty, $db:ty) => {
        shared_store!($store, $pool, $db);
        shared_grants!($store, $pool, $db);
        queue_store!($store, $pool, $db);
        result_rows!($store);
        value_rows!($store);
    };
}

#[cfg(feature = "mysql")]
mod mysql;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
pub mod prune;
mod schema;
/// One `#[tokio::test]` per dialect (under its feature) for each listed case — an
/// `async fn case(url: &str)` of the test module — named `sqlite::case` (on a fresh
/// file), `postgres::case`, `pgbouncer::case` (through the pooler in transaction mode)
/// and `mysql::case` (on the test servers; a missing one fails under `CI=true`).
#[cfg(test)]
macro_rules! on_every_dialect {
    ($($case:ident),+ $(,)?) => {
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(#[tokio::test]
            async fn $case() {
                let dir = std::env::temp_dir().join("dlock-sql-tests");
                std::fs::create_dir_all(&dir).unwrap();
                let file = format!("{}-{:016x}.sqlite", stringify!($case), dlock_core::random_u64());
                super::$case(&format!("sqlite://{}", dir.join(file).display())).await;
            })+
        }
        on_every_dialect!(@server postgres, "postgres", "DLOCK_TEST_POSTGRES_URL", ""; $($case),+);
        on_every_dialect!(@server pgbouncer, "postgres", "DLOCK_TEST_PGBOUNCER_URL",
            "pooler=transaction"; $($case),+);
        on_every_dialect!(@server mysql, "mysql", "DLOCK_TEST_MYSQL_URL", ""; $($case),+);
    };
    (@server $module:ident, $feature:literal, $var:literal, $query:literal; $($case:ident),+) => {
        #[cfg(all(feature = $feature, feature = "server-tests"))]
        mod $module {
            $(#[tokio::test]
            async fn $case() {
                let mut url = dlock_conformance::required_env($var);
                if !$query.is_empty() {
                    url.push(if url.contains('?') { '&' } else { '?' });
                    url.push_str($query);
                }
                super::$case(&url).await;
            })+
        }
    };
}
#[cfg(test)]
mod renew_batch_tests;
#[cfg(test)]
mod retake_tests;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod url;
mod waiters;
mod waiting;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::{Batcher, WaitPolicy};

pub use builder::SqlLockBuilder;
pub use fence::SqlFence;
pub use options::{DEFAULT_TABLE, validate_table_name};
pub use prune::Pruned;
pub use results::SqlResults;
pub use schema::Schema;

use options::Options;
use store::{Renewal, Store};

/// A distributed lock on PostgreSQL, MySQL/MariaDB or SQLite. Cheap to clone (clones
/// share the connection pool).
#[derive(Clone)]
pub struct SqlLock {
    store: Arc<dyn Store>,
    opts: Arc<Options>,
    /// Renewals of held locks due together, sent as one statement per batch.
    renewals: Arc<Batcher<Renewal, bool>>,
    /// The exclusive acquisitions waiting in the queue (`waiting`).
    waiting: Arc<waiters::Waiting>,
}

/// The most renewals sent in one statement: SQLite binds four parameters a lock (far
/// below its limit of 32 766), MySQL's batch is a `UNION` of this many rows.
const RENEW_BATCH: usize = 1000;

/// The batcher of `store`'s renewals: each batch one statement (MySQL: an update and
/// a read-back), made again within `timeout` on a connection found broken, as
/// [`SqlLock::op`] does.
fn renewal_batcher(store: Arc<dyn Store>, timeout: Duration) -> Batcher<Renewal, bool> {
    Batcher::start("renew", RENEW_BATCH, move |batch: Vec<Renewal>| {
        let store = Arc::clone(&store);
        async move {
            let what = format!("renew on {}", store.kind());
            let renew = || store.renew_batch(&batch);
            let answered =
                dlock_core::backend::retry_within(timeout, &what, renew, errors::is_broken, |e| {
                    errors::from_sqlx(&what, e)
                })
                .await?;
            Ok(answered.value.into_iter().map(Ok).collect())
        }
    })
}

impl std::fmt::Debug for SqlLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlLock")
            .field("database", &self.store.kind())
            .field("table", &self.opts.table)
            .finish_non_exhaustive()
    }
}

impl SqlLock {
    /// Connects with default options: `postgres://…`, `mysql://…` (or `mariadb://…`),
    /// `sqlite://path` (created if missing; WAL mode). Creates the table if missing.
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL or a database whose feature is off;
    /// [`LockError::Unavailable`] when the database cannot be reached.
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        SqlLockBuilder::new(url).connect().await
    }

    /// A builder for table name, pool size and timeouts.
    #[must_use]
    pub fn builder(url: &str) -> SqlLockBuilder {
        SqlLockBuilder::new(url)
    }

    /// Which database this is: `"postgres"`, `"mysql"` or `"sqlite"`.
    #[must_use]
    pub fn database(&self) -> &'static str {
        self.store.kind()
    }

    /// Whether this client's waiters queue (see [`SqlLockBuilder::fifo`]).
    pub(crate) fn fifo(&self) -> bool {
        self.opts
            .fifo
            .unwrap_or(self.store.kind() == "postgres" && self.opts.listen)
    }

    /// How a busy lock is waited for.
    fn wait_policy_now(&self) -> WaitPolicy {
        WaitPolicy {
            poll_min: self.opts.poll_min,
            poll_max: self.opts.poll_max,
            notify_fallback: self.opts.notify_fallback,
        }
    }

    /// Runs one statement under the operation timeout.
    /// Runs the statement `f` makes within the operation timeout. On a connection
    /// found broken — a server or pooler restarted, every idle connection in the pool
    /// died with it, and a pooler may refuse logins for a moment after — the
    /// statement is made again, after a short pause that doubles up to 200 ms, until
    /// it gets an answer or the timeout ends (then `Unavailable` with the last
    /// error). Each operation is safe to repeat: an acquisition by the same owner
    /// takes its own grant back with the same token, a renewal or release compares
    /// owner and token. A release whose first attempt went through before its
    /// connection broke answers `false`.
    async fn op<T, F, Fut>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn() -> Fut + Send,
        Fut: Future<Output = Result<T, sqlx::Error>> + Send,
    {
        let what = format!("{what} on {}", self.store.kind());
        dlock_core::backend::retry_within(self.opts.op_timeout, &what, f, errors::is_broken, |e| {
            let why = self.store.explain(&e);
            errors::explained(&what, e, why)
        })
        .await
        .map(|answered| answered.value)
    }
}
