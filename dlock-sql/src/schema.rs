//! dlock's schema as a database administrator sees it: the statements that create it
//! for a database and table, printed for review or applied by an owner role, and the
//! grants an application role needs to run on it with `create=false` — so the role
//! that takes locks never needs `CREATE`.

use dlock_core::LockError;
use dlock_core::backend::take_query;

use crate::SqlLock;
use crate::options::Options;
use crate::shared::Dialect;

/// dlock's tables (and, on PostgreSQL, its queue functions) for one database and lock
/// table, as the statements that create them.
///
/// ```
/// let schema = dlock_sql::Schema::for_url("postgres://db.internal/app?table=jobs_locks")?;
/// assert!(schema.statements[0].starts_with("CREATE TABLE IF NOT EXISTS jobs_locks ("));
/// assert!(schema.tables.contains(&"jobs_locks_queue".to_owned()));
/// let grants = schema.grants("app")?;
/// assert!(grants[0].starts_with("GRANT SELECT, INSERT, UPDATE, DELETE ON jobs_locks"));
/// # Ok::<(), dlock_core::LockError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Schema {
    /// `"postgres"`, `"mysql"` or `"sqlite"`.
    pub database: &'static str,
    /// The statements, in the order they run, each idempotent (`IF NOT EXISTS`, `OR
    /// REPLACE`): they make what is missing, and leave a table an older dlock made as
    /// it is — `dlock migrate` also upgrades those in place.
    pub statements: Vec<String>,
    /// The tables they create, the lock table first.
    pub tables: Vec<String>,
    /// The functions they create (PostgreSQL), by name.
    pub functions: Vec<String>,
}

impl Schema {
    /// The schema for `url`'s database (by its scheme) and lock table (its `table=`,
    /// default `dlock_locks`), without connecting.
    ///
    /// # Errors
    /// [`LockError::Config`] for a URL that is not a SQL one, or a bad parameter.
    pub fn for_url(url: &str) -> Result<Self, LockError> {
        let mut opts = Options::default();
        crate::url::take_url_options(url, &mut opts)?;
        let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
        let (database, dialect) = match scheme.as_deref() {
            Some("postgres" | "postgresql") => ("postgres", Dialect::Postgres),
            Some("mysql" | "mariadb") => ("mysql", Dialect::MySql),
            Some("sqlite") => ("sqlite", Dialect::Sqlite),
            _ => {
                return Err(LockError::Config(format!(
                    "{:?} is not a SQL URL: dlock keeps a schema only on postgres://, \
                     mysql://, mariadb:// and sqlite://",
                    dlock_core::redact_url(url)
                )));
            }
        };
        let table = opts.table.as_str();
        let shared = crate::shared::SharedSql::new(dialect, table);
        let queue = crate::queue::QueueSql::new(dialect, table);
        let lock_table = create_table(dialect, table).ok_or_else(|| {
            LockError::Config(format!(
                "{database}'s schema needs dlock-sql's cargo feature `{database}`, which is \
                 not enabled"
            ))
        })?;
        let statements: Vec<String> = std::iter::once(lock_table)
            .chain(shared.create)
            .chain(queue.create)
            .collect();
        let named = |prefix: &str| -> Vec<String> {
            statements
                .iter()
                .filter_map(|s| s.trim_start().strip_prefix(prefix))
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect()
                })
                .collect()
        };
        Ok(Self {
            database,
            tables: named("CREATE TABLE IF NOT EXISTS "),
            functions: named("CREATE OR REPLACE FUNCTION "),
            statements,
        })
    }

    /// The statements that give `role` what it needs to run on this schema with
    /// `create=false`: `SELECT, INSERT, UPDATE, DELETE` on each table, and on
    /// PostgreSQL `EXECUTE` on each function (which `PUBLIC` has unless revoked; the
    /// role also needs `USAGE` on the schema, which `PUBLIC` has on `public`). `role`
    /// is a PostgreSQL role name (lower case, as PostgreSQL folds it; not `public`), or a
    /// MySQL account: `app` or `'app'@'host'`.
    ///
    /// # Errors
    /// [`LockError::Config`] on SQLite (it has no roles: a file's permissions decide)
    /// or for a role name that is not a plain identifier or account.
    pub fn grants(&self, role: &str) -> Result<Vec<String>, LockError> {
        if self.database == "sqlite" {
            return Err(LockError::Config(
                "SQLite has no roles: whoever may write the database file and its \
                 directory may take locks"
                    .into(),
            ));
        }
        if !is_role(role, self.database == "mysql") {
            return Err(LockError::Config(format!(
                "role {role:?} is not allowed: use a name of [A-Za-z0-9_] not starting with \
                 a digit (MySQL: also 'name'@'host' with [A-Za-z0-9_.%-])"
            )));
        }
        let rights = "SELECT, INSERT, UPDATE, DELETE";
        Ok(if self.database == "mysql" {
            // MySQL grants on one table at a time
            self.tables
                .iter()
                .map(|t| format!("GRANT {rights} ON {t} TO {role}"))
                .collect()
        } else {
            std::iter::once(format!(
                "GRANT {rights} ON {} TO {role}",
                self.tables.join(", ")
            ))
            .chain(
                self.functions
                    .iter()
                    .map(|f| format!("GRANT EXECUTE ON FUNCTION {f} TO {role}")),
            )
            .collect()
        })
    }
}

impl SqlLock {
    /// Connects to `url` as a role that may create tables and makes dlock's schema
    /// there: creates what is missing and upgrades what an older dlock created — what
    /// connecting with `create=true` does, whatever `url`'s `create=` says. Run it
    /// once as the owner role; the application roles then connect with
    /// `create=false`.
    ///
    /// # Errors
    /// As [`SqlLock::connect`]; a role that may not create tables gets a
    /// [`LockError::Backend`] that says so.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves what it created so far; running it
    /// again completes it.
    pub async fn migrate(url: &str) -> Result<Self, LockError> {
        let url = take_query(url, |key, _| Ok(key == "create"))?;
        Self::connect(&url).await
    }
}

/// `dialect`'s lock table; `None` when its feature is off.
fn create_table(dialect: Dialect, table: &str) -> Option<String> {
    match dialect {
        #[cfg(feature = "postgres")]
        Dialect::Postgres => Some(crate::postgres::create_table(table)),
        #[cfg(feature = "mysql")]
        Dialect::MySql => Some(crate::mysql::create_table(table)),
        #[cfg(feature = "sqlite")]
        Dialect::Sqlite => Some(crate::sqlite::create_table(table)),
        #[allow(unreachable_patterns)] // with every database's feature on
        _ => None,
    }
}

/// A PostgreSQL role name, or (`mysql`) a MySQL account `name` or `'name'@'host'`.
/// Unquoted PostgreSQL names fold to lower case: only lower case is taken, so the role
/// granted is the one named, and never `public` (every role).
fn is_role(role: &str, mysql: bool) -> bool {
    let ident = |s: &str| {
        let mut chars = s.chars();
        s.len() <= 63
            && chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && (mysql
                || (!s.eq_ignore_ascii_case("public")
                    && !s.chars().any(|c| c.is_ascii_uppercase())))
    };
    let quoted = |s: &str| {
        s.len() >= 2
            && s.starts_with('\'')
            && s.ends_with('\'')
            && s[1..s.len() - 1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.%-".contains(c))
    };
    ident(role)
        || (mysql
            && role
                .split_once('@')
                .is_some_and(|(name, host)| quoted(name) && quoted(host)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_identifiers_or_mysql_accounts() {
        assert!(is_role("app_1", false));
        assert!(is_role("'app'@'10.0.%'", true));
        for bad in [
            "1app",
            "app; DROP TABLE x",
            "'app'@'%'",
            "a-b",
            "",
            "App",
            "public",
        ] {
            assert!(!is_role(bad, false), "{bad}");
        }
        assert!(!is_role("'app'@'%' OR 1", true));
    }

    /// The statements `--print` shows make what connecting makes, table for table,
    /// index for index: a schema applied by hand is the one dlock expects.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_printed_schema_is_the_one_connecting_makes() {
        use sqlx::Row as _;
        let dir = std::env::temp_dir().join("dlock-sql-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let file = |what: &str| {
            let f = format!("schema-{what}-{:016x}.sqlite", dlock_core::random_u64());
            format!("sqlite://{}?table=made", dir.join(f).display())
        };
        let (by_hand, by_dlock) = (file("hand"), file("dlock"));
        let schema = Schema::for_url(&by_hand).unwrap();
        let plain = by_hand.split('?').next().unwrap();
        let options = plain.parse::<sqlx::sqlite::SqliteConnectOptions>().unwrap();
        let hand = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .unwrap();
        for statement in &schema.statements {
            sqlx::query(sqlx::AssertSqlSafe(statement.as_str()))
                .execute(&hand)
                .await
                .unwrap();
        }
        drop(SqlLock::connect(&by_dlock).await.unwrap());
        let dlock = sqlx::SqlitePool::connect(by_dlock.split('?').next().unwrap())
            .await
            .unwrap();
        let catalog = |pool: sqlx::SqlitePool| async move {
            let rows = sqlx::query("SELECT type, name, sql FROM sqlite_master ORDER BY name")
                .fetch_all(&pool)
                .await
                .unwrap();
            rows.iter()
                .map(|r| {
                    (
                        r.get::<String, _>(0),
                        r.get::<String, _>(1),
                        r.get::<Option<String>, _>(2),
                    )
                })
                .collect::<Vec<_>>()
        };
        let made = catalog(hand).await;
        assert_eq!(made, catalog(dlock).await);
        let tables: Vec<&str> = made
            .iter()
            .filter(|(kind, ..)| kind == "table")
            .map(|(_, name, _)| name.as_str())
            .collect();
        let mut listed: Vec<&str> = schema.tables.iter().map(String::as_str).collect();
        listed.sort_unstable();
        assert_eq!(tables, listed);
    }
}
