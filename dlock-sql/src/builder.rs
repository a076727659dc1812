//! [`SqlLockBuilder`]: options, then a pool and a first connection for each database.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::within;
use dlock_core::{LockError, redact_url};

use crate::SqlLock;
#[cfg(any(feature = "postgres", feature = "mysql"))]
use crate::errors::connect_error;
use crate::errors::from_sqlx;
use crate::options::{Options, validate_table_name};
use crate::store::Store;
use crate::url::take_url_options;

/// Builds a [`SqlLock`] with options beyond the URL.
///
/// ```no_run
/// # async fn demo() -> Result<(), dlock_core::LockError> {
/// use std::time::Duration;
/// let locks = dlock_sql::SqlLock::builder("postgres://app@db.internal/app")
///     .table("app_locks")
///     .pool_size(4)
///     .op_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqlLockBuilder {
    url: String,
    opts: Options,
    table_error: Option<String>,
}

impl std::fmt::Debug for SqlLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlLockBuilder")
            .field("url", &redact_url(&self.url))
            .field("opts", &self.opts)
            .finish()
    }
}

impl SqlLockBuilder {
    /// Starts from a database URL (see [`SqlLock::connect`]).
    #[must_use]
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            opts: Options::default(),
            table_error: None,
        }
    }

    /// The lock table (default `dlock_locks`); must match `[A-Za-z_][A-Za-z0-9_]*`.
    #[must_use]
    pub fn table(mut self, table: &str) -> Self {
        match validate_table_name(table) {
            Ok(()) => self.opts.table = table.to_owned(),
            Err(e) => self.table_error = Some(e.to_string()),
        }
        self
    }

    /// Maximum connections in the pool (default 8). On PostgreSQL, waiters listen for
    /// releases on one more connection of their own, opened at the first wait.
    #[must_use]
    pub fn pool_size(mut self, n: u32) -> Self {
        self.opts.pool_size = n.max(1);
        self
    }

    /// How long one statement (and getting a connection for it) may take before the
    /// operation fails with `Unavailable` (default 5 s).
    #[must_use]
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.opts.op_timeout = d;
        self
    }

    /// The longest sleep between polls of a busy lock (default 100 ms).
    #[must_use]
    pub fn poll_max(mut self, d: Duration) -> Self {
        self.opts.poll_max = d.max(self.opts.poll_min);
        self
    }

    /// Whether PostgreSQL waiters `LISTEN` for releases (default true; turn off behind
    /// a transaction-mode pooler).
    #[must_use]
    pub fn listen(mut self, on: bool) -> Self {
        self.opts.listen = on;
        self
    }

    /// Whether waiters queue in arrival order and a release grants the lock to the
    /// oldest (URL `fifo=true|false`). By default they do where they hear their grant
    /// at once — PostgreSQL with `LISTEN` — and not at first where they poll (MySQL,
    /// SQLite, PostgreSQL behind a transaction pooler), where every queued hand-off
    /// waits for a poll (SQLite, 8 clients on one lock: 34 hand-offs/s in order against
    /// 7 680 for whoever polls first). There a waiter joins the queue once it has
    /// polled for ten polling gaps (1 s by default) and the next release grants it the
    /// lock: a client that releases and asks again at once cannot starve it.
    ///
    /// `true`: every waiter queues from its first attempt (order over throughput: cron
    /// jobs on many hosts that take turns). `false`: never (whoever polls first).
    /// Waiters that do not queue still never pass a queue that others keep.
    #[must_use]
    pub fn fifo(mut self, on: bool) -> Self {
        self.opts.fifo = Some(on);
        self
    }

    /// PostgreSQL reached through a transaction-mode pooler (PgBouncer
    /// `pool_mode=transaction` before 1.21, or without `max_prepared_statements`),
    /// where each transaction may run on another server connection; URL
    /// `pooler=transaction`. Default off.
    ///
    /// On, every statement runs in a transaction of its own (`BEGIN`, the statement,
    /// `COMMIT`) as an unnamed prepared statement, so nothing a statement needs
    /// outlives its transaction; waiters poll instead of `LISTEN`ing (a notification
    /// would reach a server connection the waiter no longer has); and sqlx's
    /// `extra_float_digits` startup parameter, which PgBouncer refuses, is not sent. A
    /// mutex operation then costs four round trips instead of one, a semaphore or
    /// read-write acquisition about twelve. A pooler that keeps prepared statements
    /// (PgBouncer 1.21 and later with `max_prepared_statements`) needs only
    /// `listen=false`, session mode neither.
    #[must_use]
    pub fn transaction_pooler(mut self, on: bool) -> Self {
        self.opts.transaction_pooler = on;
        self
    }

    /// How long a PostgreSQL waiter sleeps at most between looks when it relies on
    /// notifications (default 5 s, jittered): the safety net for a lost `NOTIFY`, and
    /// how often a queued waiter tells the queue it still waits.
    #[must_use]
    pub fn notify_fallback(mut self, d: Duration) -> Self {
        self.opts.notify_fallback = d.max(Duration::from_millis(1));
        self
    }

    /// Whether to create the table if it is missing (default true).
    #[must_use]
    pub fn create_table(mut self, on: bool) -> Self {
        self.opts.create_table = on;
        self
    }

    /// Connects, and creates the table unless told not to.
    ///
    /// # Errors
    /// See [`SqlLock::connect`].
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn connect(self) -> Result<SqlLock, LockError> {
        if let Some(e) = self.table_error {
            return Err(LockError::Config(e));
        }
        let mut opts = self.opts;
        let url = take_url_options(&self.url, &mut opts)?;
        if opts.transaction_pooler {
            opts.listen = false;
        }
        let shown = redact_url(&url);
        let scheme = url
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        let store: Arc<dyn Store> = match scheme.as_str() {
            "postgres" | "postgresql" => postgres(&url, &shown, &opts).await?,
            "mysql" | "mariadb" => mysql(&url, &shown, &opts).await?,
            "sqlite" => sqlite(&url, &shown, &opts).await?,
            _ => {
                return Err(LockError::Config(format!(
                    "{shown:?} is not a SQL URL: use postgres://, mysql://, mariadb:// or sqlite://"
                )));
            }
        };
        if opts.create_table {
            let what = format!("creating table {} on {shown}", opts.table);
            within(opts.op_timeout * 3, &what, async {
                store.migrate().await.map_err(|e| from_sqlx(&what, e))
            })
            .await?;
        }
        Ok(SqlLock {
            renewals: Arc::new(crate::renewal_batcher(Arc::clone(&store), opts.op_timeout)),
            store,
            opts: Arc::new(opts),
            waiting: Arc::default(),
        })
    }
}

/// A server database's pool. No ping per checkout: a dead connection fails its
/// statement, retried like any outage; a ping would cost a round trip per operation.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn pool_options<DB: sqlx::Database>(opts: &Options) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .max_connections(opts.pool_size)
        .acquire_timeout(opts.op_timeout)
        .test_before_acquire(false)
}

#[allow(dead_code)] // with every database's feature on
fn feature_off(feature: &str, shown: &str) -> LockError {
    LockError::Config(format!(
        "{shown:?} needs dlock-sql's cargo feature `{feature}`, which is not enabled"
    ))
}

fn bad_url(shown: &str, e: sqlx::Error) -> LockError {
    LockError::Config(format!("cannot read database URL {shown:?}: {e}"))
}

/// One connection made before the pool: a pool retries a refused connection until its
/// acquire timeout and then says only "pool timed out", so a server that is down (or
/// a wrong port) is told at once here, naming the database and where it was looked
/// for. The connection is closed again; the pool makes its own.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn reachable<O>(
    options: &O,
    database: &str,
    url: &str,
    opts: &Options,
) -> Result<(), LockError>
where
    O: sqlx::ConnectOptions,
    O::Connection: Sized,
{
    use sqlx::Connection as _;
    let at = host_port(url);
    match tokio::time::timeout(opts.op_timeout, options.connect()).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e @ (sqlx::Error::Io(_) | sqlx::Error::Tls(_)))) => Err(LockError::Unavailable {
            message: format!("cannot connect to {database} at {at}: {e}"),
            source: Some(Box::new(e)),
        }),
        // the server answered (a login refused, a pooler's complaint): as the pool would say
        Ok(Err(e)) => Err(connect_error(&redact_url(url), e)),
        Err(_) => Err(LockError::transient(format!(
            "cannot connect to {database} at {at}: no answer within {:?}",
            opts.op_timeout
        ))),
    }
}

/// The `host:port` part of a database URL, for messages (no userinfo).
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn host_port(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, shown: &str, opts: &Options) -> Result<Arc<dyn Store>, LockError> {
    let mut options =
        sqlx::postgres::PgConnectOptions::from_str(url).map_err(|e| bad_url(shown, e))?;
    if opts.transaction_pooler {
        // sqlx asks for `extra_float_digits` at startup, a parameter PgBouncer refuses
        // unless told to ignore it (`ignore_startup_parameters`); dlock reads no floats
        options = options.extra_float_digits(None);
    }
    let options_for_listen = options.clone();
    reachable(&options, "PostgreSQL", url, opts).await?;
    let pool = pool_options(opts)
        .connect_with(options)
        .await
        .map_err(|e| connect_error(shown, e))?;
    Ok(Arc::new(crate::postgres::Postgres::new(
        pool,
        options_for_listen,
        &opts.table,
        opts.listen,
        opts.transaction_pooler,
    )))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str, shown: &str, _: &Options) -> Result<Arc<dyn Store>, LockError> {
    Err(feature_off("postgres", shown))
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str, shown: &str, opts: &Options) -> Result<Arc<dyn Store>, LockError> {
    let url = url
        .strip_prefix("mariadb:")
        .map_or_else(|| url.to_owned(), |rest| format!("mysql:{rest}"));
    let options =
        sqlx::mysql::MySqlConnectOptions::from_str(&url).map_err(|e| bad_url(shown, e))?;
    reachable(&options, "MySQL/MariaDB", &url, opts).await?;
    let pool = pool_options(opts)
        .connect_with(options)
        .await
        .map_err(|e| connect_error(shown, e))?;
    Ok(Arc::new(crate::mysql::MySql::new(pool, &opts.table)))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str, shown: &str, _: &Options) -> Result<Arc<dyn Store>, LockError> {
    Err(feature_off("mysql", shown))
}

/// `sqlite:/x` — one slash — is refused: it means the file `/x` at the root of the
/// filesystem, which nobody writing it means. The forms: `sqlite:///abs/path` (an
/// absolute path), `sqlite://rel/path` and `sqlite:rel/path` (relative to the working
/// directory), `sqlite::memory:`.
#[cfg(feature = "sqlite")]
fn refuse_ambiguous_sqlite(url: &str, shown: &str) -> Result<(), LockError> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("sqlite:/") && !lower.starts_with("sqlite://") {
        let path = &url["sqlite:".len()..];
        return Err(LockError::Config(format!(
            "{shown:?}: write sqlite://{path} for the absolute path {path}, or \
             sqlite://{} for a path relative to the working directory",
            path.trim_start_matches('/')
        )));
    }
    Ok(())
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str, shown: &str, opts: &Options) -> Result<Arc<dyn Store>, LockError> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let memory = url.contains(":memory:") || url.contains("mode=memory");
    refuse_ambiguous_sqlite(url, shown)?;
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|e| bad_url(shown, e))?
        .create_if_missing(true)
        // SQLite's own wait on a locked database ends within the operation timeout.
        // With the wait for a pooled connection before it (up to the operation timeout
        // too: under load — ten thousand guards renewing at once — statements queue for
        // the pool's few connections, and a shorter pool wait failed renewals that would
        // have gone through), a statement can commit after we stopped waiting for it. It
        // does no harm: an acquire retries with the same owner id and takes its row
        // again (keeping its token), a try_acquire's row expires after its TTL, and a
        // late renew or release is what was asked for.
        .busy_timeout(opts.op_timeout * 3 / 4);
    let options = if memory {
        options
    } else {
        options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
    };
    // An in-memory database exists once per connection: keep exactly one.
    let size = if memory { 1 } else { opts.pool_size.min(4) };
    // Processes opening a fresh file at once race to switch it to WAL, and the loser
    // gets SQLITE_BUSY without the busy handler being consulted: retry for a while.
    let give_up = tokio::time::Instant::now() + opts.op_timeout * 2;
    let mut backoff =
        dlock_core::Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        let attempt = SqlitePoolOptions::new()
            .max_connections(size)
            .acquire_timeout(opts.op_timeout)
            .connect_with(options.clone())
            .await
            .map_err(|e| crate::sqlite::refused(shown, options.get_filename(), e));
        match attempt {
            Ok(pool) => return Ok(Arc::new(crate::sqlite::Sqlite::new(pool, &opts.table))),
            Err(e) if e.is_transient() && tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(backoff.next_delay(None)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str, shown: &str, _: &Options) -> Result<Arc<dyn Store>, LockError> {
    Err(feature_off("sqlite", shown))
}
