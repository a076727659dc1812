//! MySQL / MariaDB: `INSERT … ON DUPLICATE KEY UPDATE` with the `LAST_INSERT_ID(expr)`
//! trick (MySQL has no `RETURNING`), `UTC_TIMESTAMP(6)`, polling.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{from_millis, micros};
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor, Row};

use crate::hot::Hot;
use crate::queue::QueueSql;
use crate::shared::{Dialect, SharedSql};
use crate::store::{Holder, Released, Renewal, Store, Taken, renewed};

pub(crate) struct MySql {
    shared: std::sync::Arc<SharedSql>,
    /// The exclusive lock's waiters (`crate::queue`).
    queue: std::sync::Arc<QueueSql>,
    pool: MySqlPool,
    /// The single statements of acquire, renew, release and inspect.
    hot: Hot<sqlx::MySql>,
    create: String,
    table: String,
    take: String,
    remaining: String,
    /// A batch renewal's update and its read-back, each with the batch's rows where
    /// `{rows}` stands (a `SELECT ? … UNION ALL SELECT ? …` table).
    renew_batch: (String, String),
    release: String,
    revoke: String,
    holder: String,
    held: String,
}

impl MySql {
    pub(crate) fn new(pool: MySqlPool, table: &str) -> Self {
        // UTC_TIMESTAMP, not NOW(): NOW() follows each session's time_zone, and two
        // clients with different zones must still agree on expiry.
        let now = "UTC_TIMESTAMP(6)";
        // a new row's first token: see `prune`
        let first = crate::prune::now_us(Dialect::MySql);
        // free, or ours; a free row is not taken past a live queue (its head is
        // granted it instead)
        let nobody_queued = QueueSql::nobody_queued(Dialect::MySql, "");
        let free = format!("(owner = ? OR (expires_at <= {now} AND {nobody_queued}))");
        let someone_queued = QueueSql::someone_queued(Dialect::MySql, "");
        // ours and unexpired: a late duplicate of our own attempt keeps the token (the
        // owner was just assigned, expires_at not yet: it is assigned last)
        let mine = format!("(owner = ? AND expires_at > {now})");
        let remaining_ms =
            format!("CAST(CEIL(TIMESTAMPDIFF(MICROSECOND, {now}, expires_at) / 1000) AS SIGNED)");
        Self {
            queue: std::sync::Arc::new(QueueSql::new(Dialect::MySql, table)),
            shared: std::sync::Arc::new(SharedSql::new(Dialect::MySql, table)),
            hot: Hot::new(pool.clone(), false),
            pool,
            table: table.to_owned(),
            create: create_table(table),
            // The assignments run left to right and see earlier new values, so
            // expires_at must come last. LAST_INSERT_ID(x) makes the statement report
            // the token: the clock in µs on insert, max(token + 1, clock in µs) on takeover, the same token when the row
            // is already ours and unexpired, 0 while held by someone else. A row already
            // ours counts as free: an earlier attempt of this acquisition committed
            // after its reply was given up on (owner only changes when the row is
            // free, so the condition reads the same in every assignment). Its expiry
            // never goes back (see the PostgreSQL statement); a row free by expiry has
            // an old expiry, so the greater is the new one.
            take: format!(
                "INSERT INTO {table} (name, owner, token, expires_at)
                 VALUES (?, ?, LAST_INSERT_ID({first}), {now} + INTERVAL ? MICROSECOND)
                 ON DUPLICATE KEY UPDATE
                   owner = IF({free}, ?, owner),
                   token = IF({free}, LAST_INSERT_ID(IF({mine}, token, GREATEST(token + 1, {first}))), token + LAST_INSERT_ID(0)),
                   expires_at = IF({free}, GREATEST(expires_at, {now} + INTERVAL ? MICROSECOND), expires_at)"
            ),
            remaining: format!("SELECT {remaining_ms} FROM {table} WHERE name = ?"),
            // MySQL's UPDATE returns no rows: on the same connection, the renewed ones
            // are read back by the exact expiry the update wrote (@dlock_now, set just
            // before, + the TTL): a row the update skipped — expired, another owner's —
            // cannot carry it. Read anywhere else (a proxy sending the SELECT to a
            // replica), @dlock_now is NULL there and every lock reads as lost: the safe
            // side.
            renew_batch: (
                format!(
                    "UPDATE {table} t JOIN ({{rows}}) v
                       ON t.name = v.name AND t.owner = v.owner AND t.token = v.token
                     SET t.expires_at = @dlock_now + INTERVAL v.ttl MICROSECOND
                     WHERE t.expires_at > @dlock_now"
                ),
                format!(
                    "SELECT t.name, t.owner FROM {table} t JOIN ({{rows}}) v
                       ON t.name = v.name AND t.owner = v.owner AND t.token = v.token
                     WHERE t.expires_at = @dlock_now + INTERVAL v.ttl MICROSECOND"
                ),
            ),
            // LAST_INSERT_ID(x) reports whether anyone is queued (then the release
            // grants it next); the token stays
            release: format!(
                "UPDATE {table} SET owner = '', expires_at = {now},
                   token = token + 0 * LAST_INSERT_ID({someone_queued})
                 WHERE name = ? AND owner = ? AND token = ? AND expires_at > {now}"
            ),
            revoke: format!(
                "UPDATE {table} SET owner = ?
                 WHERE name = ? AND owner = ? AND token = ? AND expires_at > {now}"
            ),
            holder: format!(
                "SELECT l.owner, l.token, {remaining_ms}, v.value FROM {joined}
                 WHERE l.name = ? AND l.expires_at > {now}",
                joined = crate::values::joined(table)
            ),
            held: format!(
                "SELECT l.name, l.owner, l.token, {remaining_ms}, v.value FROM {joined}
                 WHERE l.expires_at > {now} AND LEFT(l.name, LENGTH(?)) = ?
                 ORDER BY l.name",
                joined = crate::values::joined(table)
            ),
        }
    }
}

impl MySql {
    /// Tables created before holder values (dlock 0.1) kept owners in 64 bytes — the
    /// holders table of semaphores and read-write locks until holder values reached
    /// them; an owner id with a value needs up to 233 (`HolderValue` bounds its
    /// encoding). Widening an ASCII VARCHAR below 256
    /// bytes is an in-place change of the column's metadata, done once.
    async fn widen_owner(&self) -> Result<(), sqlx::Error> {
        // the holders of semaphores and read-write locks carry holder values too
        let holders = format!("{}_holders", self.table);
        for table in [self.table.as_str(), holders.as_str()] {
            let width: Option<i64> = sqlx::query_scalar(
                "SELECT CAST(CHARACTER_MAXIMUM_LENGTH AS SIGNED) FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'owner'",
            )
            .bind(table)
            .fetch_optional(&self.pool)
            .await?;
            if width.is_some_and(|w| w < 255) {
                let alter = format!(
                    "ALTER TABLE {table} MODIFY owner VARCHAR(255) CHARACTER SET ascii NOT NULL"
                );
                sqlx::query(AssertSqlSafe(alter))
                    .execute(&self.pool)
                    .await?;
            }
        }
        Ok(())
    }
}

impl MySql {
    /// Tables of semaphores and read-write locks created before dlock 0.2 kept names
    /// in a `utf8mb4_bin` VARCHAR, which pads spaces (`'pool'` and `'pool '` were one
    /// name): turned into VARBINARY, as the lock table, once. The bytes stay as they
    /// were.
    async fn names_byte_exact(&self) -> Result<(), sqlx::Error> {
        for suffix in ["_shared", "_holders"] {
            let table = format!("{}{suffix}", self.table);
            let kind: Option<String> = sqlx::query_scalar(
                "SELECT CAST(DATA_TYPE AS CHAR) FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'name'",
            )
            .bind(&table)
            .fetch_optional(&self.pool)
            .await?;
            if kind.is_some_and(|k| !k.eq_ignore_ascii_case("varbinary")) {
                let alter = format!("ALTER TABLE {table} MODIFY name VARBINARY(300) NOT NULL");
                sqlx::query(AssertSqlSafe(alter))
                    .execute(&self.pool)
                    .await?;
            }
        }
        Ok(())
    }
}

/// The lock table's `CREATE TABLE` (see [`crate::schema`]). VARBINARY: names compare
/// byte for byte ('A' <> 'a', no collation folding).
pub(crate) fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            name VARBINARY(256) NOT NULL PRIMARY KEY,
            owner VARCHAR(255) CHARACTER SET ascii NOT NULL,
            token BIGINT NOT NULL,
            expires_at DATETIME(6) NOT NULL,
            queued_until BIGINT NOT NULL DEFAULT 0
         ) ENGINE=InnoDB"
    )
}

#[async_trait]
impl Store for MySql {
    async fn migrate(&self) -> Result<(), sqlx::Error> {
        let creates = std::iter::once(&self.create).chain(&self.shared.create);
        for create in creates.chain(&self.queue.create) {
            sqlx::query(AssertSqlSafe(create.as_str()))
                .execute(&self.pool)
                .await?;
        }
        self.widen_owner().await?;
        self.names_byte_exact().await?;
        crate::store::QueueStore::add_queue_column(self).await
    }

    async fn try_take(&self, name: &str, owner: &str, ttl: Duration) -> Result<Taken, sqlx::Error> {
        let r = sqlx::query(AssertSqlSafe(self.take.as_str()))
            .bind(name.as_bytes())
            .bind(owner)
            .bind(micros(ttl))
            .bind(owner) // free?
            .bind(owner) // new owner
            .bind(owner) // free?
            .bind(owner) // mine?
            .bind(owner) // free?
            .bind(micros(ttl));
        let r = self.hot.execute(r).await?;
        let token = r.last_insert_id();
        if token > 0 {
            return Ok(Taken::Yes(i64::try_from(token).unwrap_or(i64::MAX)));
        }
        // Polling backends need the holder's remaining time to size their sleep.
        let row = sqlx::query(AssertSqlSafe(self.remaining.as_str())).bind(name.as_bytes());
        let row = self.hot.fetch_optional(row).await?;
        let ms = match row {
            Some(r) => r.try_get::<Option<i64>, _>(0)?,
            None => None,
        };
        Ok(Taken::No {
            remaining: from_millis(ms),
            counter: None,
        })
    }

    async fn renew_batch(&self, batch: &[Renewal]) -> Result<Vec<bool>, sqlx::Error> {
        // Padded to a power of two with rows that match nothing (no lock is named ''),
        // so a handful of statement texts cover every batch size and stay prepared:
        // a statement prepared for one use is closed without a reply, and that close
        // holds the next statement back (Nagle) until the server's delayed ACK, 40 ms.
        let padded = batch.len().next_power_of_two();
        let mut rows = String::from("SELECT ? AS name, ? AS owner, ? AS token, ? AS ttl");
        for _ in 1..padded {
            rows.push_str(" UNION ALL SELECT ?, ?, ?, ?");
        }
        let with_rows = |sql: &str| {
            let mut q = sqlx::query(AssertSqlSafe(sql.replace("{rows}", &rows)));
            for r in batch {
                q = q
                    .bind(r.name.as_bytes())
                    .bind(r.owner.as_str())
                    .bind(r.token)
                    .bind(micros(r.ttl));
            }
            for _ in batch.len()..padded {
                q = q.bind(&b""[..]).bind("").bind(0_i64).bind(0_i64);
            }
            q
        };
        let (update, read_back) = &self.renew_batch;
        // One connection, no transaction: the update commits at once, so the renewed
        // expiries start as late as a single renewal's would; the read-back finds them
        // by @dlock_now, which only this connection knows.
        let mut conn = self.pool.acquire().await?;
        conn.execute(sqlx::raw_sql("SET @dlock_now = UTC_TIMESTAMP(6)"))
            .await?;
        conn.execute(with_rows(update)).await?;
        let returned = conn.fetch_all(with_rows(read_back)).await?;
        let returned = returned
            .iter()
            .map(|row| {
                let name: Vec<u8> = row.try_get(0)?;
                Ok((String::from_utf8_lossy(&name).into_owned(), row.try_get(1)?))
            })
            .collect::<Result<Vec<(String, String)>, sqlx::Error>>()?;
        Ok(renewed(batch, &returned))
    }

    async fn release(&self, name: &str, owner: &str, token: i64) -> Result<Released, sqlx::Error> {
        let r = sqlx::query(AssertSqlSafe(self.release.as_str()))
            .bind(name.as_bytes())
            .bind(owner)
            .bind(token);
        let r = self.hot.execute(r).await?;
        Ok(if r.rows_affected() == 1 {
            Released::Yes {
                queued: r.last_insert_id() > 0,
            }
        } else {
            Released::No
        })
    }

    async fn revoke(
        &self,
        name: &str,
        owner: &str,
        token: i64,
        mark: &str,
    ) -> Result<bool, sqlx::Error> {
        let q = sqlx::query(AssertSqlSafe(self.revoke.as_str()))
            .bind(mark)
            .bind(name.as_bytes())
            .bind(owner)
            .bind(token);
        Ok(self.hot.execute(q).await?.rows_affected() == 1)
    }

    async fn holder(&self, name: &str) -> Result<Option<Holder>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.holder.as_str())).bind(name.as_bytes());
        let row = self.hot.fetch_optional(row).await?;
        row.map(|r| Holder::at(&r, 0)).transpose()
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, sqlx::Error> {
        crate::doctor::mysql(&self.pool, &self.table).await
    }

    async fn held(&self, prefix: &str) -> Result<Vec<(String, Holder)>, sqlx::Error> {
        let rows = sqlx::query(AssertSqlSafe(self.held.as_str()))
            .bind(prefix.as_bytes())
            .bind(prefix.as_bytes())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let name: Vec<u8> = r.try_get(0)?;
                Ok((
                    String::from_utf8_lossy(&name).into_owned(),
                    Holder::at(r, 1)?,
                ))
            })
            .collect()
    }

    async fn fence(&self, resource: &str, token: i64) -> Result<i64, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let stored =
            crate::fence::raise_mysql(&mut tx, &self.shared.table, resource, token).await?;
        tx.commit().await?;
        Ok(stored)
    }

    fn kind(&self) -> &'static str {
        "mysql"
    }
}

dialect_parts!(MySql, sqlx::mysql::MySqlPool, sqlx::MySql);
