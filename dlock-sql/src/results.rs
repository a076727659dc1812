//! Idempotency records in the database: [`SqlResults`], the [`ResultStore`] of
//! [`dlock_core::Idempotent`] on the lock's own pool.
//!
//! One row per request id in `<lock table>_results`: the highest token that began or
//! recorded (a runner's fence), the result, and its expiry by the database clock. A
//! record is one conditional `UPDATE … WHERE token <= ?`, so a runner whose lease ran
//! out cannot overwrite the result of the one that took over.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::millis;
use dlock_core::{FencingToken, LockError, ResultStore};

use crate::SqlLock;
use crate::shared::Dialect;

/// The results table of a lock table.
#[must_use]
pub fn results_table(lock_table: &str) -> String {
    format!("{lock_table}_results")
}

/// The statements of one dialect.
#[derive(Debug)]
pub(crate) struct ResultSql {
    pub create: String,
    /// Raises the token, clears an expired result; then (MySQL) reads the token.
    pub begin: Vec<String>,
    pub record: String,
    pub token: String,
    pub result: String,
}

impl ResultSql {
    pub(crate) fn new(dialect: Dialect, lock_table: &str) -> Self {
        let t = results_table(lock_table);
        let now = dialect.now_ms();
        let create = match dialect {
            Dialect::Postgres => format!(
                "CREATE TABLE IF NOT EXISTS {t} (request TEXT PRIMARY KEY,
                 token BIGINT NOT NULL, result BYTEA, expires_at BIGINT NOT NULL)"
            ),
            // VARBINARY: byte for byte, as lock names (a _bin collation pads spaces)
            Dialect::MySql => format!(
                "CREATE TABLE IF NOT EXISTS {t} (request VARBINARY(1024) NOT NULL PRIMARY KEY,
                 token BIGINT NOT NULL, result LONGBLOB NULL, expires_at BIGINT NOT NULL)
                 ENGINE=InnoDB"
            ),
            Dialect::Sqlite => format!(
                "CREATE TABLE IF NOT EXISTS {t} (request TEXT PRIMARY KEY,
                 token INTEGER NOT NULL, result BLOB, expires_at INTEGER NOT NULL) STRICT"
            ),
        };
        // binds: request, token, retain ms
        let begin = match dialect {
            // MySQL assigns left to right, seeing new values: the token goes last
            Dialect::MySql => vec![
                format!(
                    "INSERT INTO {t} (request, token, result, expires_at) VALUES (?, ?, NULL, {now} + ?)
                     ON DUPLICATE KEY UPDATE
                       result = IF(expires_at <= {now}, NULL, result),
                       expires_at = IF(token <= VALUES(token), GREATEST(expires_at, VALUES(expires_at)), expires_at),
                       token = GREATEST(token, VALUES(token))"
                ),
                format!("SELECT token FROM {t} WHERE request = ?"),
            ],
            _ => {
                let max = if dialect == Dialect::Postgres { "GREATEST" } else { "MAX" };
                vec![dialect.number(&format!(
                    "INSERT INTO {t} (request, token, result, expires_at) VALUES (?, ?, NULL, {now} + ?)
                     ON CONFLICT (request) DO UPDATE SET
                       result = CASE WHEN {t}.expires_at <= {now} THEN NULL ELSE {t}.result END,
                       expires_at = CASE WHEN {t}.token <= excluded.token
                         THEN {max}({t}.expires_at, excluded.expires_at) ELSE {t}.expires_at END,
                       token = {max}({t}.token, excluded.token)
                     RETURNING token"
                ))]
            }
        };
        Self {
            create,
            begin,
            // binds: result, retain ms, token, request, token
            record: dialect.number(&format!(
                "UPDATE {t} SET result = ?, expires_at = {now} + ?, token = ?
                 WHERE request = ? AND token <= ?"
            )),
            token: dialect.number(&format!("SELECT token FROM {t} WHERE request = ?")),
            result: dialect.number(&format!(
                "SELECT result FROM {t} WHERE request = ? AND result IS NOT NULL AND expires_at > {now}"
            )),
        }
    }
}

/// The lock's results table as a [`ResultStore`].
///
/// ```no_run
/// use std::sync::Arc;
/// use dlock_core::{Idempotent, Outcome};
/// # async fn charge(url: &str) -> Result<(), dlock_core::LockError> {
/// let lock = dlock_sql::SqlLock::connect(url).await?;
/// let once = Idempotent::new(Arc::new(lock.clone()), Arc::new(lock.results()));
/// match once.run_once("payment/981", |_token| async { Ok::<_, String>(b"ok".to_vec()) }).await? {
///     Outcome::Ran(r) | Outcome::Done(r) => println!("{}", String::from_utf8_lossy(&r)),
///     Outcome::InProgress => println!("being charged right now"),
///     Outcome::Failed(e) => println!("failed, will be retried: {e}"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SqlResults {
    lock: SqlLock,
}

impl SqlLock {
    /// This lock's idempotency records as a [`ResultStore`].
    #[must_use]
    pub fn results(&self) -> SqlResults {
        SqlResults { lock: self.clone() }
    }
}

fn as_i64(request: &str, token: FencingToken) -> Result<i64, LockError> {
    dlock_core::require_real_token(request, token)?;
    i64::try_from(token.get()).map_err(|_| {
        LockError::InvalidArgument(format!("token {token} on {request} exceeds a BIGINT"))
    })
}

#[async_trait]
impl ResultStore for SqlResults {
    async fn begin(
        &self,
        request: &str,
        token: FencingToken,
        retain: Duration,
    ) -> Result<(), LockError> {
        let t = as_i64(request, token)?;
        let stored = self
            .lock
            .op("begin request", || {
                self.lock.store.begin_request(request, t, millis(retain))
            })
            .await?;
        if stored > t {
            return Err(LockError::stale_token(
                request,
                u64::try_from(stored).ok(),
                token,
            ));
        }
        Ok(())
    }

    async fn record(
        &self,
        request: &str,
        token: FencingToken,
        result: &[u8],
        retain: Duration,
    ) -> Result<(), LockError> {
        let t = as_i64(request, token)?;
        let (updated, seen) = self
            .lock
            .op("record result", || {
                self.lock
                    .store
                    .record_result(request, t, result, millis(retain))
            })
            .await?;
        if updated {
            Ok(())
        } else {
            Err(LockError::stale_token(
                request,
                seen.and_then(|s| u64::try_from(s).ok()),
                token,
            ))
        }
    }

    async fn result(&self, request: &str) -> Result<Option<Vec<u8>>, LockError> {
        self.lock
            .op("read result", || self.lock.store.request_result(request))
            .await
    }
}

/// [`crate::store::ResultRows`] for a dialect's store type (with `pool` and
/// `shared.results`): the same text for every dialect.
macro_rules! result_rows {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ResultRows for $store {
            async fn begin_request(
                &self,
                request: &str,
                token: i64,
                retain_ms: i64,
            ) -> Result<i64, sqlx::Error> {
                let r = &self.shared.results;
                let upsert = sqlx::query(AssertSqlSafe(r.begin[0].as_str()))
                    .bind(request)
                    .bind(token)
                    .bind(retain_ms);
                use sqlx::Row as _;
                let row = match r.begin.get(1) {
                    None => self.hot.fetch_optional(upsert).await?,
                    Some(read) => {
                        self.hot.execute(upsert).await?;
                        let read = sqlx::query(AssertSqlSafe(read.as_str())).bind(request);
                        self.hot.fetch_optional(read).await?
                    }
                };
                row.ok_or(sqlx::Error::RowNotFound)?.try_get(0)
            }

            async fn record_result(
                &self,
                request: &str,
                token: i64,
                result: &[u8],
                retain_ms: i64,
            ) -> Result<(bool, Option<i64>), sqlx::Error> {
                let r = &self.shared.results;
                let updated = sqlx::query(AssertSqlSafe(r.record.as_str()))
                    .bind(result)
                    .bind(retain_ms)
                    .bind(token)
                    .bind(request)
                    .bind(token);
                let updated = self.hot.execute(updated).await?.rows_affected();
                if updated > 0 {
                    return Ok((true, None));
                }
                // none updated: a higher token holds the request — or (MySQL) the row
                // already had these very values
                use sqlx::Row as _;
                let seen = sqlx::query(AssertSqlSafe(r.token.as_str())).bind(request);
                let seen: Option<i64> = match self.hot.fetch_optional(seen).await? {
                    Some(row) => Some(row.try_get(0)?),
                    None => None,
                };
                Ok((seen.is_some_and(|s| s <= token), seen))
            }

            async fn request_result(&self, request: &str) -> Result<Option<Vec<u8>>, sqlx::Error> {
                use sqlx::Row as _;
                let q =
                    sqlx::query(AssertSqlSafe(self.shared.results.result.as_str())).bind(request);
                match self.hot.fetch_optional(q).await? {
                    Some(row) => Ok(Some(row.try_get(0)?)),
                    None => Ok(None),
                }
            }
        }
    };
}
