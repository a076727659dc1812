//! How much a backend's server keeps: records (rows, keys, znodes) and bytes, read from
//! the server itself, for the scale scenario's distinct-names run.

/// What the server holds at one moment; `None` where it cannot be read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    /// Rows of the lock table, keys, or znodes.
    pub records: Option<u64>,
    /// Storage in bytes (table size, memory, database size).
    pub bytes: Option<u64>,
}

/// A reader of the footprint of the URL's backend.
pub struct Footprint {
    url: String,
    /// SQL: the lock table (`table=` in the URL, else `dlock_locks`).
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    table: String,
}

impl Footprint {
    /// The probe for `url` (SQL: the table the URL names, or the default `dlock_locks`;
    /// a name that is not a plain identifier is not read).
    #[must_use]
    pub fn for_url(url: &str) -> Self {
        let query = url.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or_default();
        let table = query
            .split('&')
            .find_map(|p| p.strip_prefix("table="))
            .unwrap_or("dlock_locks");
        let plain = table
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        Self {
            url: url.split('?').next().unwrap_or(url).to_owned(),
            table: if plain { table } else { "" }.to_owned(),
        }
    }

    /// Reads the server's footprint now.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    pub async fn read(&self) -> Snapshot {
        let (scheme, _) = crate::url_parts::scheme_and_base(&self.url);
        let hosts = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r)
            .split('/')
            .next()
            .unwrap_or_default();
        let first = hosts
            .rsplit_once('@')
            .map_or(hosts, |(_, h)| h)
            .split(',')
            .next()
            .unwrap_or_default()
            .to_owned();
        match scheme.as_str() {
            #[cfg(feature = "sqlite")]
            "sqlite" => sql::<sqlx::Sqlite>(
                &self.url,
                &self.table,
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()".into(),
            )
            .await
            .unwrap_or_default(),
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => {
                let size = format!("SELECT pg_total_relation_size('{}')", self.table);
                sql::<sqlx::Postgres>(&self.url, &self.table, size)
                    .await
                    .unwrap_or_default()
            }
            #[cfg(feature = "mysql")]
            "mysql" | "mariadb" => sql::<sqlx::MySql>(
                &self.url.replacen("mariadb:", "mysql:", 1),
                &self.table,
                "SELECT CAST(0 AS SIGNED)".into(),
            )
            .await
            .map(|s| Snapshot { bytes: None, ..s })
            .unwrap_or_default(),
            #[cfg(feature = "redis")]
            "redis" | "redlock" => redis(&format!("redis://{first}")).await.unwrap_or_default(),
            "etcd" => etcd(&first).await.unwrap_or_default(),
            "zk" | "zookeeper" => zookeeper(&first).await.unwrap_or_default(),
            _ => Snapshot::default(),
        }
    }
}

/// Rows of the lock `table` (a plain identifier: see [`Footprint::for_url`]), and the
/// bytes `size_sql` reports.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
async fn sql<DB: sqlx::Database>(url: &str, table: &str, size_sql: String) -> Option<Snapshot>
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    i64: sqlx::Type<DB> + for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    use sqlx::{AssertSqlSafe, Connection};
    if table.is_empty() {
        return None;
    }
    let mut c = DB::Connection::connect(url).await.ok()?;
    let rows: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&mut c)
        .await
        .ok()?;
    let bytes: Option<i64> = sqlx::query_scalar(AssertSqlSafe(size_sql))
        .fetch_one(&mut c)
        .await
        .ok();
    let _ = c.close().await;
    Some(Snapshot {
        records: u64::try_from(rows).ok(),
        bytes: bytes.and_then(|b| u64::try_from(b).ok()),
    })
}

/// Keys in the database (`DBSIZE`) and `used_memory`.
#[cfg(feature = "redis")]
async fn redis(url: &str) -> Option<Snapshot> {
    let mut c = redis::Client::open(url)
        .ok()?
        .get_multiplexed_async_connection()
        .await
        .ok()?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut c).await.ok()?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut c)
        .await
        .ok()?;
    let bytes = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:")?.trim().parse().ok());
    Some(Snapshot {
        records: Some(keys),
        bytes,
    })
}

/// The size of the database in use (`etcd_mvcc_db_total_size_in_use_in_bytes`), and
/// the keys in it (`etcd_debugging_mvcc_keys_total`).
async fn etcd(host: &str) -> Option<Snapshot> {
    let get = format!("GET /metrics HTTP/1.0\r\nHost: {host}\r\n\r\n");
    let text = crate::server_requests::exchange(host, get.as_bytes()).await?;
    let metric = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    };
    Some(Snapshot {
        records: metric("etcd_debugging_mvcc_keys_total "),
        bytes: metric("etcd_mvcc_db_total_size_in_use_in_bytes "),
    })
}

/// Znodes and their approximate data size (`mntr`).
async fn zookeeper(host: &str) -> Option<Snapshot> {
    let text = crate::server_requests::exchange(host, b"mntr").await?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some(Snapshot {
        records: value("zk_znode_count"),
        bytes: value("zk_approximate_data_size"),
    })
}

#[cfg(test)]
mod tests {
    use super::Footprint;

    #[test]
    fn the_lock_table_is_the_one_the_url_names() {
        let table = |url: &str| Footprint::for_url(url).table;
        assert_eq!(table("postgres://h/db"), "dlock_locks");
        assert_eq!(
            table("sqlite:///x.db?mode=rwc&table=dlock_bench_1a2b"),
            "dlock_bench_1a2b"
        );
        // not a plain identifier: not read at all
        assert_eq!(table("postgres://h/db?table=a;drop"), "");
    }
}
