//! What a run leaves on the server, and taking it away at the end.
//!
//! A run takes thousands of names (the held and scale scenarios), and a SQL backend
//! keeps a row per name after its release — the row carries the name's fencing token.
//! So on SQL a run's locks live in a table of the run's own (`table=dlock_bench_…`
//! added to the URL, unless the URL names one), dropped with its companions (the
//! semaphores', read-write locks', fences', results' and proclaimed values' tables) and the floors' table
//! when the run ends.
//! Elsewhere a released name leaves at most its fencing counter, which the backend
//! expires or deletes by itself.

/// The URL a run connects to, and what to remove when it ends.
pub struct Scratch {
    url: String,
    /// The plain SQL URL (no dlock options) and the tables to drop; `None` off SQL.
    sql: Option<(String, Vec<String>)>,
}

impl Scratch {
    /// The run's URL for `url`: on SQL, with a table of the run's own.
    #[must_use]
    pub fn for_url(url: &str) -> Self {
        let (scheme, plain) = crate::floor::scheme_and_base(url);
        let sql = matches!(
            scheme.as_str(),
            "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb"
        );
        if !sql {
            return Self {
                url: url.to_owned(),
                sql: None,
            };
        }
        let (url, fragment) = url.split_once('#').map_or((url, ""), |(u, f)| (u, f));
        let query = url.split_once('?').map_or("", |(_, q)| q);
        let own_table = !query.split('&').any(|p| p.starts_with("table="));
        let mut tables = Vec::new();
        let url = if own_table {
            let table = format!("dlock_bench_{:08x}", dlock_any::random_u64() & 0xffff_ffff);
            tables.push(table.clone());
            tables.extend(
                ["shared", "holders", "fences", "results", "values"]
                    .map(|t| format!("{table}_{t}")),
            );
            let sep = match (url.contains('?'), url.ends_with(['?', '&'])) {
                (false, _) => "?",
                (true, true) => "",
                (true, false) => "&",
            };
            format!("{url}{sep}table={table}")
        } else {
            url.to_owned()
        };
        let url = if fragment.is_empty() {
            url
        } else {
            format!("{url}#{fragment}")
        };
        let plain = plain.replacen("mariadb:", "mysql:", 1);
        Self {
            url,
            sql: Some((plain, tables)),
        }
    }

    /// The URL the run connects to.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops what the run created — with `floors`, the floors' table `dlock_floor` too
    /// (a run with floors creates it). Call it once the run's locks are released.
    ///
    /// The tables are dropped over the URL without its query, as the floors connect:
    /// where a query option decides the server or database, they may be left behind
    /// (the run's own table has a name of its own; nothing of the user's is dropped).
    ///
    /// # Errors
    /// The database's, as text.
    ///
    /// # Cancel safety
    /// Dropping it leaves what was not dropped yet.
    pub async fn clean(&self, floors: bool) -> Result<(), String> {
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
    let scheme = crate::floor::scheme_and_base(url).0;
    macro_rules! drop_all {
        ($conn:ty) => {{
            let mut conn = <$conn>::connect(url).await?;
            for t in tables {
                // the names are ours: letters, digits and underscores
                let sql = format!("DROP TABLE IF EXISTS {t}");
                sqlx::query(AssertSqlSafe(sql)).execute(&mut conn).await?;
            }
            conn.close().await
        }};
    }
    match scheme.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => drop_all!(sqlx::PgConnection),
        #[cfg(feature = "mysql")]
        "mysql" => drop_all!(sqlx::MySqlConnection),
        #[cfg(feature = "sqlite")]
        "sqlite" => drop_all!(sqlx::SqliteConnection),
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
        assert_eq!(tables.len(), 6, "{tables:?}");
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
        // not SQL: as given
        let s = Scratch::for_url("redis://h:6379");
        assert_eq!(s.url(), "redis://h:6379");
        assert!(s.sql.is_none());
    }
}
