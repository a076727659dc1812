//! What decides whether locking on the database is safe: its version, clock, role and
//! durability; for PostgreSQL whether LISTEN/NOTIFY reaches us; for SQLite the file's
//! filesystem.

use dlock_core::Finding;
#[cfg(any(feature = "postgres", feature = "mysql"))]
use dlock_core::{clock_offset, now_ms};
use sqlx::Row;

/// The finding on the lock table `table` whose columns are `columns` (comma-separated,
/// empty when the table is missing).
fn table_finding(table: &str, columns: &str) -> Finding {
    let has = |c: &str| columns.split(',').any(|x| x.trim().eq_ignore_ascii_case(c));
    let missing: Vec<&str> = ["name", "owner", "token", "expires_at"]
        .into_iter()
        .filter(|c| !has(c))
        .collect();
    if missing.is_empty() {
        Finding::info("lock table", format!("{table} ({columns})"))
    } else if columns.is_empty() {
        Finding::critical(
            "lock table",
            format!("{table} is missing"),
            "create it: connect once as a role that may create tables, without create=false \
             (the URL's default creates it), then run with create=false",
        )
    } else {
        Finding::critical(
            "lock table",
            format!("{table} lacks {}", missing.join(", ")),
            "another program owns a table of this name: give dlock its own (table=… in the URL)",
        )
    }
}

/// What losing the last commits does to a lock table: the rows go back, so a lock can
/// be granted twice (tokens, taking at least the clock, still rise).
#[cfg(any(feature = "postgres", feature = "mysql"))]
const LOST_COMMITS: &str = "a crash can lose the last commits — the lock table goes back \
                            and a lock can be granted twice (its tokens still rise with the \
                            database clock, so a fence tells the holders apart)";

#[cfg(feature = "postgres")]
pub(crate) async fn postgres(
    pool: &sqlx::postgres::PgPool,
    hot: &crate::hot::Hot<sqlx::Postgres>,
    listen: bool,
    table: &str,
) -> Result<Vec<Finding>, sqlx::Error> {
    let sent = now_ms();
    let row = hot
        .fetch_optional(sqlx::query(
            "SELECT current_setting('server_version'),
                (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint,
                pg_is_in_recovery(),
                current_setting('synchronous_commit'),
                (SELECT count(*) FROM pg_stat_replication),
                current_setting('synchronous_standby_names')",
        ))
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    let received = now_ms();
    let mut found = vec![
        Finding::info(
            "server version",
            format!("PostgreSQL {}", row.try_get::<String, _>(0)?),
        ),
        clock_offset("database clock", row.try_get(1)?, sent, received),
    ];
    if row.try_get::<bool, _>(2)? {
        found.push(Finding::critical(
            "role",
            "a standby (in recovery)",
            "point dlock at the primary: a standby refuses the writes a lock needs",
        ));
    } else {
        found.push(Finding::info("role", "primary"));
    }
    let sync: String = row.try_get(3)?;
    if sync == "off" {
        found.push(Finding::critical(
            "synchronous_commit",
            "off",
            format!("{LOST_COMMITS}; set synchronous_commit = on for the lock table's database"),
        ));
    } else {
        found.push(Finding::info("synchronous_commit", sync));
    }
    let standbys: i64 = row.try_get(4)?;
    let sync_names: String = row.try_get(5)?;
    if standbys > 0 && sync_names.is_empty() {
        found.push(Finding::warning(
            "standbys",
            format!("{standbys} asynchronous"),
            "a failover to a standby that missed the last commits can grant a lock twice \
             (tokens still rise with the database clock); name them in \
             synchronous_standby_names",
        ));
    } else {
        found.push(Finding::info(
            "standbys",
            format!("{standbys} (synchronous_standby_names '{sync_names}')"),
        ));
    }
    let columns = sqlx::query(
        "SELECT string_agg(column_name, ',' ORDER BY ordinal_position)
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = lower($1)",
    )
    .bind(table);
    let columns: Option<String> = match hot.fetch_optional(columns).await? {
        Some(row) => row.try_get(0)?,
        None => None,
    };
    found.push(table_finding(table, &columns.unwrap_or_default()));
    found.push(if hot.own_transactions() {
        Finding::info(
            "wake-ups",
            "pooler=transaction: each statement in a transaction of its own; waiters poll",
        )
    } else if listen {
        notify_round_trip(pool).await?
    } else {
        Finding::info("wake-ups", "listen=false: waiters poll")
    });
    Ok(found)
}

/// Whether a notification sent through the pool reaches a listener: not behind a
/// transaction pooler, where it would go to whichever server connection the pooler
/// picked.
#[cfg(feature = "postgres")]
async fn notify_round_trip(pool: &sqlx::postgres::PgPool) -> Result<Finding, sqlx::Error> {
    let channel = format!("dlock_doctor_{:016x}", dlock_core::random_u64());
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(&channel).await?;
    let sent = std::time::Instant::now();
    sqlx::query("SELECT pg_notify($1, 'doctor')")
        .bind(&channel)
        .execute(pool)
        .await?;
    let got = tokio::time::timeout(std::time::Duration::from_secs(2), listener.recv()).await;
    Ok(match got {
        Ok(Ok(_)) => Finding::info(
            "wake-ups",
            format!("LISTEN/NOTIFY round trip {} ms", sent.elapsed().as_millis()),
        ),
        // on one server a notification arrives in milliseconds; one that goes astray
        // is the mark of a transaction pooler, where a statement dlock prepared on one
        // server connection may be run on another client's under the same name
        _ => Finding::critical(
            "wake-ups",
            "a notification sent on one connection did not reach a listener on another \
             within 2 s: the mark of a transaction-mode pooler (PgBouncer)",
            "add pooler=transaction to the URL: behind such a pooler dlock's prepared \
             statements can run on another client's server connection, and waiters are \
             never woken",
        ),
    })
}

#[cfg(feature = "mysql")]
pub(crate) async fn mysql(
    pool: &sqlx::mysql::MySqlPool,
    table: &str,
) -> Result<Vec<Finding>, sqlx::Error> {
    let sent = now_ms();
    let row = sqlx::query(
        "SELECT VERSION(),
                CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED),
                CAST(@@read_only AS SIGNED),
                CAST(@@innodb_flush_log_at_trx_commit AS SIGNED)",
    )
    .fetch_one(pool)
    .await?;
    let received = now_ms();
    let mut found = vec![
        Finding::info("server version", row.try_get::<String, _>(0)?),
        clock_offset("database clock", row.try_get(1)?, sent, received),
    ];
    if row.try_get::<i64, _>(2)? != 0 {
        found.push(Finding::critical(
            "read_only",
            "ON",
            "point dlock at the primary: a read-only server refuses the writes a lock needs",
        ));
    }
    let columns: Option<String> = sqlx::query_scalar(
        "SELECT CAST(GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) AS CHAR)
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
    )
    .bind(table)
    .fetch_one(pool)
    .await?;
    found.push(table_finding(table, &columns.unwrap_or_default()));
    let flush: i64 = row.try_get(3)?;
    if flush == 1 {
        found.push(Finding::info("innodb_flush_log_at_trx_commit", "1"));
    } else {
        found.push(Finding::critical(
            "innodb_flush_log_at_trx_commit",
            flush.to_string(),
            format!("{LOST_COMMITS}; set innodb_flush_log_at_trx_commit = 1"),
        ));
    }
    Ok(found)
}

/// Filesystems on which SQLite's file locks do not hold between hosts, or at all.
#[cfg(feature = "sqlite")]
const NETWORK_FILESYSTEMS: [&str; 8] = [
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "fuse.sshfs",
    "ceph",
];

#[cfg(feature = "sqlite")]
pub(crate) async fn sqlite(
    pool: &sqlx::sqlite::SqlitePool,
    table: &str,
) -> Result<Vec<Finding>, sqlx::Error> {
    let version: String = sqlx::query_scalar("SELECT sqlite_version()")
        .fetch_one(pool)
        .await?;
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await?;
    let file: String = sqlx::query("PRAGMA database_list")
        .fetch_one(pool)
        .await?
        .try_get(2)?;
    let columns: Option<String> =
        sqlx::query_scalar("SELECT group_concat(name, ',') FROM pragma_table_info(?1)")
            .bind(table)
            .fetch_one(pool)
            .await?;
    let mut found = vec![
        table_finding(table, &columns.unwrap_or_default()),
        Finding::info("server version", format!("SQLite {version} (in process)")),
        Finding::info("journal_mode", journal),
        Finding::info(
            "clock",
            "this host's: every process on it reads the same clock",
        ),
        Finding::warning(
            "scope",
            "an SQLite file excludes the processes of this host only",
            "for jobs on many hosts (cron on each of them), point every host at one \
             PostgreSQL or MariaDB; a file on a shared network filesystem does not work",
        ),
    ];
    match filesystem_of(&file) {
        Some(fs) if NETWORK_FILESYSTEMS.contains(&fs.as_str()) => found.push(Finding::critical(
            "filesystem",
            format!("{file} is on {fs}"),
            "SQLite's file locks do not work across hosts on a network filesystem: use \
             PostgreSQL or MariaDB for locks shared by many hosts",
        )),
        Some(fs) => found.push(Finding::info("filesystem", format!("{file} is on {fs}"))),
        None => {}
    }
    Ok(found)
}

/// The type of the filesystem `path` is on, from `/proc/mounts` (Linux).
#[cfg(feature = "sqlite")]
fn filesystem_of(path: &str) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (_, point, fs) = (parts.next()?, parts.next()?, parts.next()?);
            path.starts_with(point)
                .then(|| (point.len(), fs.to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}
