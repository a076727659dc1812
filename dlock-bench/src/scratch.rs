//! What a run leaves on the server, and taking it away at the end.
//!
//! A run takes thousands of names (the held and scale scenarios), and a backend may
//! keep something per name after its release: a SQL row, a Redis fencing counter —
//! each carries the name's token, so dlock itself never deletes them.
//! - On SQL a run's locks live in a table of the run's own (`table=dlock_bench_…`
//!   added to the URL, unless the URL names one), dropped with its companions (the
//!   semaphores', read-write locks', fences', results', proclaimed values' and waiters' tables)
//!   and the floors' table when the run ends.
//! - On Redis (one server, Sentinel, Cluster, Redlock) its keys carry a prefix of the
//!   run's own (`prefix=dlock-bench-…:` added, unless the URL names one), as do the
//!   floors' names: every key with the run's id is deleted at the end, on every server.
//! - etcd and ZooKeeper delete what a run made by themselves (keys on leases; queue
//!   nodes and the floors' directories are containers).

#[cfg(feature = "redis")]
mod redis_keys;

use std::sync::OnceLock;

/// This process's run id (8 hex digits): in its table, key prefix and floor names.
pub fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{:08x}", dlock_any::random_u64() & 0xffff_ffff))
}

/// The URL a run connects to, and what to remove when it ends.
pub struct Scratch {
    url: String,
    /// The plain SQL URL (no dlock options) and the tables to drop; `None` off SQL.
    sql: Option<(String, Vec<String>)>,
    /// On Redis, the `SCAN MATCH` pattern of the run's keys.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    redis: Option<String>,
}

/// Whether `url`'s query sets `key`.
fn has_param(url: &str, key: &str) -> bool {
    let url = url.split('#').next().unwrap_or(url);
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|p| p.split('=').next() == Some(key))
}

/// `url` with `key=value` added to its query (before a fragment).
fn with_param(url: &str, key: &str, value: &str) -> String {
    let (url, fragment) = url.split_once('#').map_or((url, ""), |(u, f)| (u, f));
    let sep = match (url.contains('?'), url.ends_with(['?', '&'])) {
        (false, _) => "?",
        (true, true) => "",
        (true, false) => "&",
    };
    let url = format!("{url}{sep}{key}={value}");
    if fragment.is_empty() {
        url
    } else {
        format!("{url}#{fragment}")
    }
}

impl Scratch {
    /// The run's URL for `url`: on SQL, with a table of the run's own; on Redis, with
    /// a key prefix of the run's own.
    #[must_use]
    pub fn for_url(url: &str) -> Self {
        let (scheme, plain) = crate::url_parts::scheme_and_base(url);
        match scheme.as_str() {
            "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb" => Self::sql(url, plain),
            "redis" | "rediss" | "redis-sentinel" | "redis-cluster" | "redlock" => {
                // a prefix the URL names is the user's: only the floors' keys go then
                let url = if has_param(url, "prefix") {
                    url.to_owned()
                } else {
                    with_param(url, "prefix", &format!("dlock-bench-{}:", run_id()))
                };
                Self {
                    url,
                    sql: None,
                    redis: Some(format!("*dlock-bench-{}*", run_id())),
                }
            }
            _ => Self {
                url: url.to_owned(),
                sql: None,
                redis: None,
            },
        }
    }

    fn sql(url: &str, plain: &str) -> Self {
        let mut tables = Vec::new();
        let url = if has_param(url, "table") {
            url.to_owned()
        } else {
            let table = format!("dlock_bench_{}", run_id());
            tables.push(table.clone());
            tables.extend(
                ["shared", "holders", "fences", "results", "values", "queue"]
                    .map(|t| format!("{table}_{t}")),
            );
            with_param(url, "table", &table)
        };
        let plain = plain.replacen("mariadb:", "mysql:", 1);
        Self {
            url,
            sql: Some((plain, tables)),
            redis: None,
        }
    }

    /// The URL the run connects to.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Removes what the run created — on SQL its tables and, with `floors`, the
    /// floors' table `dlock_floor` too (a run with floors creates it); on Redis every
    /// key with the run's id. Call it once the run's locks are released.
    ///
    /// The tables are dropped over the URL without its query, as the floors connect:
    /// where a query option decides the server or database, they may be left behind
    /// (the run's own table has a name of its own; nothing of the user's is dropped).
    ///
    /// # Errors
    /// The database's or server's, as text.
    ///
    /// # Cancel safety
    /// Dropping it leaves what was not removed yet.
    pub async fn clean(&self, floors: bool) -> Result<(), String> {
        #[cfg(feature = "redis")]
        if let Some(pattern) = &self.redis {
            return redis_keys::delete_matching(&self.url, pattern)
                .await
                .map_err(|e| format!("could not delete the run's keys ({pattern}): {e}"));
        }
        let Some((url, own)) = &self.sql else {
            return Ok(());
        };
        let mut tables = own.clone();
        // (never a table the URL names as dlock's: that one is the user's)
        if floors && !self.url.contains("table=dlock_floor") {
            tables.push("dlock_floor".to_owned());
        }
        if tables.is_empty() {
            return Ok(());
        }
        let tables = &tables;
        drop_tables(url, tables).await.map_err(|e| {
            format!(
                "could not drop the run's tables ({}): {e}",
                tables.join(", ")
            )
        })
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn drop_tables(url: &str, tables: &[String]) -> Result<(), sqlx::Error> {
    use sqlx::{AssertSqlSafe, Connection};
    let scheme = crate::url_parts::scheme_and_base(url).0;
    macro_rules! drop_all {
        ($conn:ty, $functions:expr) => {{
            let mut conn = <$conn>::connect(url).await?;
            for t in tables {
                // the names are ours: letters, digits and underscores
                let sql = format!("DROP TABLE IF EXISTS {t}");
                sqlx::query(AssertSqlSafe(sql)).execute(&mut conn).await?;
            }
            // PostgreSQL: the lock table's queue functions (`dlock_sql`'s
            // `queue/calls.rs`), which no table owns
            let functions: &[&str] = $functions;
            if let Some(lock_table) = tables.first().filter(|_| !functions.is_empty()) {
                let names: Vec<String> = functions
                    .iter()
                    .map(|f| format!("{lock_table}_{f}"))
                    .collect();
                let sql = format!("DROP FUNCTION IF EXISTS {}", names.join(", "));
                sqlx::query(AssertSqlSafe(sql)).execute(&mut conn).await?;
            }
            conn.close().await
        }};
    }
    match scheme.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            drop_all!(sqlx::PgConnection, &["qtake1", "qgrant1", "qgive1"])
        }
        #[cfg(feature = "mysql")]
        "mysql" => drop_all!(sqlx::MySqlConnection, &[]),
        #[cfg(feature = "sqlite")]
        "sqlite" => drop_all!(sqlx::SqliteConnection, &[]),
        _ => Ok(()),
    }
}

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
async fn drop_tables(_url: &str, _tables: &[String]) -> Result<(), std::convert::Infallible> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_runs_get_a_table_of_their_own() {
        let s = Scratch::for_url("sqlite:///tmp/x.sqlite?mode=rwc");
        assert!(
            s.url()
                .starts_with("sqlite:///tmp/x.sqlite?mode=rwc&table=dlock_bench_")
        );
        let s = Scratch::for_url("postgres://h/db");
        assert!(s.url().starts_with("postgres://h/db?table=dlock_bench_"));
        let (plain, tables) = s.sql.as_ref().unwrap();
        assert_eq!(plain, "postgres://h/db");
        assert_eq!(tables.len(), 7, "{tables:?}");
        assert!(
            tables.iter().all(|t| t.starts_with("dlock_bench_")),
            "{tables:?}"
        );
        // a table the URL names is the user's: kept
        let s = Scratch::for_url("mariadb://h/db?table=mine");
        assert_eq!(s.url(), "mariadb://h/db?table=mine");
        assert!(s.sql.as_ref().unwrap().1.is_empty());
        assert_eq!(s.sql.as_ref().unwrap().0, "mysql://h/db");
        // a bare `?` or a trailing `&`, and a fragment, stay well-formed
        let s = Scratch::for_url("postgres://h/db?");
        assert!(
            s.url().starts_with("postgres://h/db?table=dlock_bench_"),
            "{}",
            s.url()
        );
        let s = Scratch::for_url("postgres://h/db?sslmode=require&");
        assert!(
            s.url()
                .starts_with("postgres://h/db?sslmode=require&table=dlock_bench_")
        );
        let s = Scratch::for_url("sqlite:///x.db?mode=rwc#f");
        assert!(
            s.url()
                .starts_with("sqlite:///x.db?mode=rwc&table=dlock_bench_")
        );
        assert!(s.url().ends_with("#f"), "{}", s.url());
        // etcd: as given
        let s = Scratch::for_url("etcd://h:2379");
        assert_eq!(s.url(), "etcd://h:2379");
        assert!(s.sql.is_none() && s.redis.is_none());
    }

    #[test]
    fn redis_runs_get_a_prefix_of_their_own() {
        let id = run_id();
        let s = Scratch::for_url("redis://h:6379/7");
        assert_eq!(
            s.url(),
            format!("redis://h:6379/7?prefix=dlock-bench-{id}:")
        );
        assert_eq!(
            s.redis.as_deref(),
            Some(format!("*dlock-bench-{id}*").as_str())
        );
        let s = Scratch::for_url("redlock://a:1,b:2?restart-delay=0s");
        assert_eq!(
            s.url(),
            format!("redlock://a:1,b:2?restart-delay=0s&prefix=dlock-bench-{id}:")
        );
        // a prefix the URL names is kept (only the floors' keys carry the run's id)
        let s = Scratch::for_url("redis-cluster://a:1?prefix=app:");
        assert_eq!(s.url(), "redis-cluster://a:1?prefix=app:");
        assert!(s.redis.is_some());
    }
}
