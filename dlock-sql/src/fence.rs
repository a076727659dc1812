//! Fences in the database: a table of high-water marks, raised inside the caller's own
//! transaction, so the check and the caller's writes commit together or not at all.
//!
//! The table is `<lock table>_fences` (`dlock_locks_fences` by default), created with the
//! lock's tables:
//!
//! ```sql
//! -- PostgreSQL
//! CREATE TABLE dlock_locks_fences (resource TEXT PRIMARY KEY, token BIGINT NOT NULL);
//! INSERT INTO dlock_locks_fences (resource, token) VALUES ($1, $2)
//!   ON CONFLICT (resource) DO UPDATE
//!   SET token = GREATEST(dlock_locks_fences.token, EXCLUDED.token)
//!   RETURNING token;                         -- above $2: stale, roll back
//! -- MySQL / MariaDB
//! CREATE TABLE dlock_locks_fences (resource VARBINARY(1024) NOT NULL PRIMARY KEY,
//!   token BIGINT NOT NULL) ENGINE=InnoDB;
//! INSERT INTO dlock_locks_fences (resource, token) VALUES (?, ?)
//!   ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token));
//! SELECT token FROM dlock_locks_fences WHERE resource = ? FOR UPDATE; -- above ?: stale
//! -- SQLite
//! CREATE TABLE dlock_locks_fences (resource TEXT PRIMARY KEY, token INTEGER NOT NULL) STRICT;
//! INSERT INTO dlock_locks_fences (resource, token) VALUES (?1, ?2)
//!   ON CONFLICT (resource) DO UPDATE SET token = MAX(token, excluded.token)
//!   RETURNING token;
//! ```
//!
//! The upsert never lowers a mark and keeps the resource's row locked (SQLite: the
//! database) until the transaction ends, so two holders cannot both pass: the later
//! transaction waits for the earlier and then sees its mark. Why a crash between the
//! check and the write cannot happen: they are one transaction — either both commit or
//! neither does. On [`LockError::StaleToken`], roll the transaction back.
//!
//! For a table of your own, the one-statement form is a conditional update —
//! `UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2`, the
//! token bound through [`bind_token`] (which refuses token 0) — and
//! [`updated_or_stale`] turns its row count into the same error.

use async_trait::async_trait;
use dlock_core::{Fence, FencingToken, LockError};

use crate::SqlLock;
use crate::errors::from_sqlx;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use sqlx::AssertSqlSafe;

/// The fence table of a lock table.
#[must_use]
pub fn fence_table(lock_table: &str) -> String {
    format!("{lock_table}_fences")
}

/// Its `CREATE TABLE IF NOT EXISTS` in `dialect`.
pub(crate) fn create(dialect: crate::shared::Dialect, lock_table: &str) -> String {
    let t = fence_table(lock_table);
    match dialect {
        crate::shared::Dialect::Postgres => format!(
            "CREATE TABLE IF NOT EXISTS {t} (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)"
        ),
        crate::shared::Dialect::MySql => format!(
            // VARBINARY: byte for byte, as lock names (a _bin collation pads spaces)
            "CREATE TABLE IF NOT EXISTS {t} (resource VARBINARY(1024) NOT NULL PRIMARY KEY,
             token BIGINT NOT NULL) ENGINE=InnoDB"
        ),
        crate::shared::Dialect::Sqlite => format!(
            "CREATE TABLE IF NOT EXISTS {t} (resource TEXT PRIMARY KEY, token INTEGER NOT NULL) STRICT"
        ),
    }
}

/// `token` as the `BIGINT` to bind in a fenced statement of your own (`… AND fence <=
/// $2`); token 0 (a fallback's lease, `DLOCK_TOKEN=0` of an unlocked run, which no lock
/// service granted) is refused outright, before anything is written — a fresh row's
/// fence of 0 would let it through.
///
/// # Errors
/// [`LockError::StaleToken`] for token 0; [`LockError::InvalidArgument`] for a token
/// beyond a `BIGINT`.
pub fn bind_token(resource: &str, token: FencingToken) -> Result<i64, LockError> {
    as_i64(resource, token)
}

/// A token as the `BIGINT` it is stored as; token 0 (a fallback's lease, which no lock
/// service granted) is refused outright.
fn as_i64(resource: &str, token: FencingToken) -> Result<i64, LockError> {
    dlock_core::require_real_token(resource, token)?;
    i64::try_from(token.get()).map_err(|_| {
        LockError::InvalidArgument(format!("token {token} on {resource} exceeds a BIGINT"))
    })
}

/// Admitted when the mark after the upsert is the offered token; stale above it.
fn judge(resource: &str, token: FencingToken, stored: i64) -> Result<(), LockError> {
    match u64::try_from(stored) {
        Ok(s) if s <= token.get() => Ok(()),
        Ok(s) => Err(LockError::stale_token(resource, Some(s), token)),
        Err(_) => Err(LockError::backend_msg(format!(
            "negative fence {stored} on {resource}"
        ))),
    }
}

/// Runs one dialect's `raise` with `token` as a BIGINT and judges the mark it returns:
/// the one body of every `fence_*` function.
async fn raised<F, Fut>(resource: &str, token: FencingToken, raise: F) -> Result<(), LockError>
where
    F: FnOnce(i64) -> Fut,
    Fut: std::future::Future<Output = Result<i64, sqlx::Error>>,
{
    let stored = raise(as_i64(resource, token)?)
        .await
        .map_err(|e| from_sqlx("fence", e))?;
    judge(resource, token, stored)
}

/// The fence table of `lock_table`, after checking the name (it is spliced into SQL).
fn checked_fence_table(lock_table: &str) -> Result<String, sqlx::Error> {
    crate::validate_table_name(lock_table).map_err(|e| sqlx::Error::Configuration(e.into()))?;
    Ok(fence_table(lock_table))
}

/// Raises `resource`'s mark to `token` inside the caller's PostgreSQL transaction.
///
/// ```no_run
/// use dlock_core::{FencingToken, LockError};
/// # async fn pay(pool: sqlx::PgPool, token: FencingToken) -> Result<(), LockError> {
/// let mut tx = pool.begin().await.map_err(|e| LockError::backend("begin", e))?;
/// dlock_sql::fence::fence_postgres(&mut tx, "dlock_locks", "invoice/7", token).await?;
/// sqlx::query("UPDATE invoices SET paid = true WHERE id = 7")
///     .execute(&mut *tx)
///     .await
///     .map_err(|e| LockError::backend("update", e))?;
/// tx.commit().await.map_err(|e| LockError::backend("commit", e))?; // both, or neither
/// # Ok(()) }
/// ```
///
/// The statement is prepared once per connection and kept: behind a transaction-mode
/// pooler use [`fence_postgres_unprepared`].
///
/// # Errors
/// [`LockError::StaleToken`] (roll back); `InvalidName`-like `Config` for a bad table;
/// a database error.
///
/// # Cancel safety
/// It runs in the caller's transaction: dropped mid-statement, that transaction is in
/// an unknown state — roll it back (dropping it does).
#[cfg(feature = "postgres")]
pub async fn fence_postgres(
    conn: &mut sqlx::PgConnection,
    lock_table: &str,
    resource: &str,
    token: FencingToken,
) -> Result<(), LockError> {
    raised(resource, token, |t| {
        raise_postgres(conn, lock_table, resource, t, true)
    })
    .await
}

/// [`fence_postgres`] without a prepared statement, for a connection behind a
/// transaction-mode pooler (PgBouncer `pool_mode=transaction` before 1.21, or without
/// `max_prepared_statements`): there each transaction may run on a server connection
/// another client used in between, where a statement prepared in an earlier
/// transaction is missing — or is another client's under the same name. It costs one
/// more round trip than [`fence_postgres`] (the statement is parsed and described
/// each time).
///
/// ```no_run
/// use dlock_core::{FencingToken, LockError};
/// # async fn pay(pool: sqlx::PgPool, token: FencingToken) -> Result<(), LockError> {
/// // `pool` reaches PostgreSQL through PgBouncer in transaction mode
/// let mut tx = pool.begin().await.map_err(|e| LockError::backend("begin", e))?;
/// dlock_sql::fence::fence_postgres_unprepared(&mut tx, "dlock_locks", "invoice/7", token).await?;
/// sqlx::query("UPDATE invoices SET paid = true WHERE id = 7")
///     .persistent(false) // your own statements too
///     .execute(&mut *tx)
///     .await
///     .map_err(|e| LockError::backend("update", e))?;
/// tx.commit().await.map_err(|e| LockError::backend("commit", e))?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`fence_postgres`].
///
/// # Cancel safety
/// As [`fence_postgres`].
#[cfg(feature = "postgres")]
pub async fn fence_postgres_unprepared(
    conn: &mut sqlx::PgConnection,
    lock_table: &str,
    resource: &str,
    token: FencingToken,
) -> Result<(), LockError> {
    raised(resource, token, |t| {
        raise_postgres(conn, lock_table, resource, t, false)
    })
    .await
}

#[cfg(feature = "postgres")]
pub(crate) async fn raise_postgres(
    conn: &mut sqlx::PgConnection,
    lock_table: &str,
    resource: &str,
    token: i64,
    persistent: bool,
) -> Result<i64, sqlx::Error> {
    let t = checked_fence_table(lock_table)?;
    let sql = format!(
        "INSERT INTO {t} (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE
         SET token = GREATEST({t}.token, EXCLUDED.token) RETURNING token"
    );
    sqlx::query_scalar(AssertSqlSafe(sql))
        .persistent(persistent)
        .bind(resource)
        .bind(token)
        .fetch_one(conn)
        .await
}

/// Raises `resource`'s mark to `token` inside the caller's MySQL / MariaDB transaction
/// (two statements: the upsert, which locks the row, then reading the mark back).
///
/// # Errors
/// As [`fence_postgres`].
///
/// # Cancel safety
/// As [`fence_postgres`].
#[cfg(feature = "mysql")]
pub async fn fence_mysql(
    conn: &mut sqlx::MySqlConnection,
    lock_table: &str,
    resource: &str,
    token: FencingToken,
) -> Result<(), LockError> {
    raised(resource, token, |t| {
        raise_mysql(conn, lock_table, resource, t)
    })
    .await
}

#[cfg(feature = "mysql")]
pub(crate) async fn raise_mysql(
    conn: &mut sqlx::MySqlConnection,
    lock_table: &str,
    resource: &str,
    token: i64,
) -> Result<i64, sqlx::Error> {
    let t = checked_fence_table(lock_table)?;
    let upsert = format!(
        "INSERT INTO {t} (resource, token) VALUES (?, ?)
         ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
    );
    sqlx::query(AssertSqlSafe(upsert))
        .bind(resource.as_bytes())
        .bind(token)
        .execute(&mut *conn)
        .await?;
    // a locking read: the latest committed mark, never the transaction's snapshot
    // (an upsert that changed nothing leaves no version of its own to read)
    let read = format!("SELECT token FROM {t} WHERE resource = ? FOR UPDATE");
    sqlx::query_scalar(AssertSqlSafe(read))
        .bind(resource.as_bytes())
        .fetch_one(conn)
        .await
}

/// Raises `resource`'s mark to `token` inside the caller's SQLite transaction.
///
/// # Errors
/// As [`fence_postgres`].
///
/// # Cancel safety
/// As [`fence_postgres`].
#[cfg(feature = "sqlite")]
pub async fn fence_sqlite(
    conn: &mut sqlx::SqliteConnection,
    lock_table: &str,
    resource: &str,
    token: FencingToken,
) -> Result<(), LockError> {
    raised(resource, token, |t| {
        raise_sqlite(conn, lock_table, resource, t)
    })
    .await
}

#[cfg(feature = "sqlite")]
pub(crate) async fn raise_sqlite(
    conn: &mut sqlx::SqliteConnection,
    lock_table: &str,
    resource: &str,
    token: i64,
) -> Result<i64, sqlx::Error> {
    let t = checked_fence_table(lock_table)?;
    let sql = format!(
        "INSERT INTO {t} (resource, token) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE
         SET token = MAX(token, excluded.token) RETURNING token"
    );
    sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(resource)
        .bind(token)
        .fetch_one(conn)
        .await
}

/// A conditional update of your own table (`… WHERE … AND fence <= $token`, the token
/// bound through [`bind_token`]) as a fence: no row updated means a higher token wrote
/// there first.
///
/// # Errors
/// [`LockError::StaleToken`] (the mark it lost to is not known) when `rows_affected`
/// is 0, and for token 0 whatever the count (roll back: [`bind_token`] refuses it
/// before the update).
pub fn updated_or_stale(
    rows_affected: u64,
    resource: &str,
    token: FencingToken,
) -> Result<(), LockError> {
    dlock_core::require_real_token(resource, token)?;
    if rows_affected == 0 {
        Err(LockError::stale_token(resource, None, token))
    } else {
        Ok(())
    }
}

/// The lock's fence table behind the [`Fence`] trait: each check in a transaction of
/// its own, on the lock's pool. For checks that must commit with your writes, use
/// [`fence_postgres`] ([`fence_postgres_unprepared`] behind a transaction-mode pooler),
/// [`fence_mysql`] or [`fence_sqlite`] in your transaction.
#[derive(Clone, Debug)]
pub struct SqlFence {
    lock: SqlLock,
}

impl SqlLock {
    /// This lock's fence table as a [`Fence`].
    #[must_use]
    pub fn fence(&self) -> SqlFence {
        SqlFence { lock: self.clone() }
    }
}

#[async_trait]
impl Fence for SqlFence {
    async fn check_and_raise(&self, resource: &str, token: FencingToken) -> Result<(), LockError> {
        let t = as_i64(resource, token)?;
        let stored = self
            .lock
            .op("fence", || self.lock.store.fence(resource, t))
            .await?;
        judge(resource, token, stored)
    }
}
