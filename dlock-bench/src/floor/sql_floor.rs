//! The SQL floors: the acquire and release statements with nothing around them.

use super::*;
use sqlx::AssertSqlSafe;

/// The two statements on one connection of its own (no pool between: a pool's
/// checkout costs, and sqlx's default one pings the server before each), and for the
/// parallel scenario's forks a pool the size of the adapter's (8; SQLite 4) that does
/// not ping, as the adapter's does not.
pub struct SqlFloor<DB: sqlx::Database> {
    one: Option<tokio::sync::Mutex<DB::Connection>>,
    pool: sqlx::Pool<DB>,
    take: &'static str,
    release: &'static str,
    name: String,
    owner: String,
}

/// A pool of `connections` to the PostgreSQL server `url`, with the floor's table.
#[cfg(feature = "postgres")]
pub async fn postgres_pool(url: &str, connections: u32) -> Result<sqlx::PgPool, String> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(connections)
        .test_before_acquire(false)
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name TEXT PRIMARY KEY, owner TEXT NOT NULL, token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)")
        .execute(&pool).await.map_err(|e| e.to_string())?;
    Ok(pool)
}

#[cfg(feature = "postgres")]
pub async fn postgres(url: &str) -> Result<Box<dyn Floor>, String> {
    let pool = postgres_pool(url, 8).await?;
    Ok(Box::new(SqlFloor {
        one: Some(one(&pool).await?),
        pool,
        take: "INSERT INTO dlock_floor AS d (name, owner, token, expires_at) VALUES ($1, $2, 1, clock_timestamp() + interval '10 seconds') \
               ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = d.token + 1, expires_at = EXCLUDED.expires_at \
               WHERE d.expires_at <= clock_timestamp() RETURNING token",
        release: "WITH r AS (UPDATE dlock_floor SET owner = '', expires_at = clock_timestamp() WHERE name = $1 AND owner = $2 RETURNING name) \
                  SELECT pg_notify('bench_floor', name) FROM r",
        name: key(),
        owner: owner(),
    }))
}

#[cfg(feature = "mysql")]
pub async fn mysql(url: &str) -> Result<Box<dyn Floor>, String> {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(8)
        .test_before_acquire(false)
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name VARBINARY(256) NOT NULL PRIMARY KEY, owner VARCHAR(64) NOT NULL, token BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB")
        .execute(&pool).await.map_err(|e| e.to_string())?;
    Ok(Box::new(SqlFloor {
        one: Some(one(&pool).await?),
        pool,
        take: "INSERT INTO dlock_floor (name, owner, token, expires_at) VALUES (?, ?, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND) \
               ON DUPLICATE KEY UPDATE owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner), \
               token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), token + LAST_INSERT_ID(0)), \
               expires_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND, expires_at)",
        release: "UPDATE dlock_floor SET owner = '', expires_at = UTC_TIMESTAMP(6) WHERE name = ? AND owner = ?",
        name: key(),
        owner: owner(),
    }))
}

#[cfg(feature = "sqlite")]
pub async fn sqlite(url: &str) -> Result<Box<dyn Floor>, String> {
    use std::str::FromStr;
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| e.to_string())?
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .busy_timeout(std::time::Duration::from_secs(5));
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect_with(opts)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("CREATE TABLE IF NOT EXISTS dlock_floor (name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT")
        .execute(&pool).await.map_err(|e| e.to_string())?;
    Ok(Box::new(SqlFloor {
        one: Some(one(&pool).await?),
        pool,
        take: "INSERT INTO dlock_floor (name, owner, token, expires_at) VALUES (?1, ?2, 1, CAST(unixepoch('subsec') * 1000 AS INTEGER) + 10000) \
               ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = dlock_floor.token + 1, expires_at = excluded.expires_at \
               WHERE dlock_floor.expires_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER) RETURNING token",
        release: "UPDATE dlock_floor SET owner = '', expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE name = ?1 AND owner = ?2",
        name: key(),
        owner: owner(),
    }))
}

/// A connection taken out of `pool` for good.
async fn one<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
) -> Result<tokio::sync::Mutex<DB::Connection>, String> {
    let conn = pool.acquire().await.map_err(|e| e.to_string())?;
    Ok(tokio::sync::Mutex::new(conn.detach()))
}

#[async_trait]
impl<DB> Floor for SqlFloor<DB>
where
    DB: sqlx::Database,
    for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    fn describe(&self) -> &'static str {
        "1 upsert statement + 1 update statement, on one connection"
    }
    async fn cycle(&self) -> Result<(), String> {
        let take = sqlx::query(AssertSqlSafe(self.take))
            .bind(self.name.clone())
            .bind(self.owner.clone());
        let release = sqlx::query(AssertSqlSafe(self.release))
            .bind(self.name.clone())
            .bind(self.owner.clone());
        if let Some(one) = &self.one {
            let mut conn = one.lock().await;
            take.execute(&mut *conn).await.map_err(|e| e.to_string())?;
            release
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
        } else {
            take.execute(&self.pool).await.map_err(|e| e.to_string())?;
            release
                .execute(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    async fn fork(&self) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(Self {
            one: None,
            pool: self.pool.clone(),
            take: self.take,
            release: self.release,
            name: key(),
            owner: owner(),
        }))
    }
}
