//! SQLite: `INSERT … ON CONFLICT … RETURNING`, `unixepoch('subsec')`, polling.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::LockError;
use dlock_core::backend::{from_millis, millis};
use sqlx::sqlite::SqlitePool;
use sqlx::{AssertSqlSafe, Row};

use crate::hot::Hot;
use crate::queue::QueueSql;
use crate::shared::{Dialect, SharedSql};
use crate::store::{Holder, Released, Renewal, Store, Taken, renewed};

pub(crate) struct Sqlite {
    shared: std::sync::Arc<SharedSql>,
    /// The exclusive lock's waiters (`crate::queue`).
    queue: std::sync::Arc<QueueSql>,
    pool: SqlitePool,
    /// The single statements of acquire, renew, release and inspect.
    hot: Hot<sqlx::Sqlite>,
    create: String,
    take: String,
    remaining: String,
    /// A batch renewal: the head, then `(?, ?, ?, ?)` per lock, then the tail.
    renew_batch: (String, String),
    release: String,
    revoke: String,
    holder: String,
    held: String,
    /// The database file, named when it cannot be written.
    file: std::path::PathBuf,
}

impl Sqlite {
    pub(crate) fn new(pool: SqlitePool, table: &str) -> Self {
        // The bundled SQLite (3.51) has unixepoch('subsec'); a system SQLite before
        // 3.42 would return NULL here, which is why the crate bundles its own.
        let now = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
        // a new row's first token: see `prune`
        let first = crate::prune::now_us(Dialect::Sqlite);
        let nobody_queued = QueueSql::nobody_queued(Dialect::Sqlite, &format!("{table}."));
        let someone_queued = QueueSql::someone_queued(Dialect::Sqlite, "");
        Self {
            file: pool.connect_options().get_filename().to_path_buf(),
            queue: std::sync::Arc::new(QueueSql::new(Dialect::Sqlite, table)),
            shared: std::sync::Arc::new(SharedSql::new(Dialect::Sqlite, table)),
            hot: Hot::new(pool.clone(), false),
            pool,
            create: create_table(table),
            // A row already ours is taken again, keeping its token while unexpired and
            // its expiry never earlier (a late duplicate of our own attempt: see the
            // PostgreSQL statement). A free row is not taken past a live queue.
            take: format!(
                "INSERT INTO {table} (name, owner, token, expires_at)
                 VALUES (?1, ?2, {first}, {now} + ?3)
                 ON CONFLICT (name) DO UPDATE
                   SET owner = excluded.owner,
                       token = CASE WHEN {table}.owner = excluded.owner AND {table}.expires_at > {now}
                                    THEN {table}.token ELSE MAX({table}.token + 1, {first}) END,
                       expires_at = MAX({table}.expires_at, excluded.expires_at)
                   WHERE {table}.owner = excluded.owner
                      OR ({table}.expires_at <= {now} AND {nobody_queued})
                 RETURNING token"
            ),
            remaining: format!("SELECT expires_at - {now} FROM {table} WHERE name = ?1"),
            renew_batch: (
                format!("UPDATE {table} SET expires_at = {now} + v.column4 FROM (VALUES "),
                format!(
                    ") AS v WHERE {table}.name = v.column1 AND {table}.owner = v.column2
                       AND {table}.token = v.column3 AND {table}.expires_at > {now}
                     RETURNING {table}.name, {table}.owner"
                ),
            ),
            // and whether anyone is queued (then the release grants it next)
            release: format!(
                "UPDATE {table} SET owner = '', expires_at = {now}
                 WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > {now}
                 RETURNING {someone_queued}"
            ),
            revoke: format!(
                "UPDATE {table} SET owner = ?4
                 WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > {now}"
            ),
            holder: format!(
                "SELECT l.owner, l.token, l.expires_at - {now}, v.value FROM {joined}
                 WHERE l.name = ?1 AND l.expires_at > {now}",
                joined = crate::values::joined(table)
            ),
            held: format!(
                "SELECT l.name, l.owner, l.token, l.expires_at - {now}, v.value FROM {joined}
                 WHERE l.expires_at > {now} AND substr(l.name, 1, length(?1)) = ?1
                 ORDER BY l.name",
                joined = crate::values::joined(table)
            ),
        }
    }
}

/// The lock table's `CREATE TABLE` (see [`crate::schema`]).
pub(crate) fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            queued_until INTEGER NOT NULL DEFAULT 0
         ) STRICT"
    )
}

#[async_trait]
impl Store for Sqlite {
    async fn migrate(&self) -> Result<(), sqlx::Error> {
        let creates = std::iter::once(&self.create).chain(&self.shared.create);
        for create in creates.chain(&self.queue.create) {
            sqlx::query(AssertSqlSafe(create.as_str()))
                .execute(&self.pool)
                .await?;
        }
        crate::store::QueueStore::add_queue_column(self).await
    }

    async fn try_take(&self, name: &str, owner: &str, ttl: Duration) -> Result<Taken, sqlx::Error> {
        let take = sqlx::query(AssertSqlSafe(self.take.as_str()))
            .bind(name)
            .bind(owner)
            .bind(millis(ttl));
        if let Some(row) = self.hot.fetch_optional(take).await? {
            return Ok(Taken::Yes(row.try_get(0)?));
        }
        let remaining = sqlx::query(AssertSqlSafe(self.remaining.as_str())).bind(name);
        let ms: Option<i64> = match self.hot.fetch_optional(remaining).await? {
            Some(row) => row.try_get(0)?,
            None => None,
        };
        Ok(Taken::No {
            remaining: from_millis(ms),
            counter: None,
        })
    }

    async fn renew_batch(&self, batch: &[Renewal]) -> Result<Vec<bool>, sqlx::Error> {
        let (head, tail) = &self.renew_batch;
        let rows = vec!["(?, ?, ?, ?)"; batch.len()].join(", ");
        // one text per batch size: not worth a prepared statement each
        let mut q = sqlx::query(AssertSqlSafe(format!("{head}{rows}{tail}"))).persistent(false);
        for r in batch {
            q = q
                .bind(&r.name)
                .bind(&r.owner)
                .bind(r.token)
                .bind(millis(r.ttl));
        }
        let returned = self.hot.fetch_all(q).await?;
        let returned = returned
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<Vec<(String, String)>, sqlx::Error>>()?;
        Ok(renewed(batch, &returned))
    }

    async fn release(&self, name: &str, owner: &str, token: i64) -> Result<Released, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.release.as_str()))
            .bind(name)
            .bind(owner)
            .bind(token);
        Ok(match self.hot.fetch_optional(row).await? {
            Some(row) => Released::Yes {
                queued: row.try_get::<i64, _>(0)? != 0,
            },
            None => Released::No,
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
            .bind(name)
            .bind(owner)
            .bind(token)
            .bind(mark);
        Ok(self.hot.execute(q).await?.rows_affected() == 1)
    }

    async fn holder(&self, name: &str) -> Result<Option<Holder>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(self.holder.as_str())).bind(name);
        let row = self.hot.fetch_optional(row).await?;
        row.map(|r| Holder::at(&r, 0)).transpose()
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, sqlx::Error> {
        crate::doctor::sqlite(&self.pool, &self.shared.table).await
    }

    async fn held(&self, prefix: &str) -> Result<Vec<(String, Holder)>, sqlx::Error> {
        let rows = sqlx::query(AssertSqlSafe(self.held.as_str()))
            .bind(prefix)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, Holder::at(r, 1)?)))
            .collect()
    }

    async fn fence(&self, resource: &str, token: i64) -> Result<i64, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let stored =
            crate::fence::raise_sqlite(&mut tx, &self.shared.table, resource, token).await?;
        tx.commit().await?;
        Ok(stored)
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn explain(&self, e: &sqlx::Error) -> Option<String> {
        unwritable(&self.file, e)
    }
}

/// A failed first connection to the database file `file` (shown as `shown`), with
/// what [`unwritable`] can say about it: a file in a directory this user cannot
/// reach or write fails here, before any statement.
pub(crate) fn refused(shown: &str, file: &std::path::Path, e: sqlx::Error) -> LockError {
    let why = unwritable(file, &e);
    crate::errors::explained(&format!("connecting to {shown}"), e, why)
}

/// What a person needs to fix SQLite's refusal to write `file` (`SQLITE_READONLY` and
/// its extended codes, `SQLITE_CANTOPEN`): who owns the file and its directory, their
/// modes, and the user this process runs as; when a directory on the way cannot be
/// searched, that directory. `None` for any other error.
#[cfg(unix)]
fn unwritable(file: &std::path::Path, e: &sqlx::Error) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let sqlx::Error::Database(db) = e else {
        return None;
    };
    let code: i64 = db.code()?.parse().ok()?;
    if !matches!(code & 0xff, 8 | 14) {
        return None;
    }
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let dir = file.parent()?;
    let shown = |p: &std::path::Path, m: &std::fs::Metadata| {
        format!(
            "{} (owner uid {}, mode {:o})",
            p.display(),
            m.uid(),
            m.mode() & 0o7777
        )
    };
    let describe = |p: &std::path::Path| match std::fs::metadata(p) {
        Ok(m) => shown(p, &m),
        Err(e) => format!("{}: {e}", p.display()),
    };
    // the owner of /proc/self is this process's effective user (Linux)
    let me = std::fs::metadata("/proc/self").map_or_else(
        |_| "this process's user".to_owned(),
        |m| format!("uid {}", m.uid()),
    );
    if let Err(e) = std::fs::metadata(&file)
        && e.kind() == std::io::ErrorKind::PermissionDenied
    {
        // the nearest directory this user can still see is the one it cannot search
        let blocked = file
            .ancestors()
            .skip(1)
            .find_map(|a| std::fs::metadata(a).ok().map(|m| shown(a, &m)))?;
        return Some(format!(
            "the database file {} is out of {me}'s reach, which dlock runs as: the \
             directory {blocked} cannot be searched by it",
            file.display()
        ));
    }
    Some(format!(
        "the database file {} and its directory {} must both be writable by {me}, which \
         dlock runs as: SQLite writes the file, and its -wal and -shm files beside it",
        describe(&file),
        describe(dir)
    ))
}

#[cfg(not(unix))]
fn unwritable(_: &std::path::Path, _: &sqlx::Error) -> Option<String> {
    None
}

dialect_parts!(Sqlite, sqlx::sqlite::SqlitePool, sqlx::Sqlite);
