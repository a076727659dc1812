//! A holder's proclaimed value (`DistributedLock::proclaim`): a row of
//! `<lock table>_values` — the name, the proclaiming owner id and the value — written
//! only while the lock row holds that owner and token, and read with the holder
//! (joined on name and owner), so a value never passes to the next holder. One row per
//! name that ever proclaimed (elections), overwritten by the next proclaim.

use crate::shared::Dialect;

/// The values table of a lock table.
#[must_use]
pub fn values_table(lock_table: &str) -> String {
    format!("{lock_table}_values")
}

/// The statements of one dialect.
#[derive(Debug)]
pub(crate) struct ValueSql {
    pub create: String,
    /// Binds: value, name, owner, token. One row affected when proclaimed (MySQL: 0
    /// also when the row already had this value).
    pub proclaim: String,
}

impl ValueSql {
    pub(crate) fn new(dialect: Dialect, lock_table: &str) -> Self {
        let v = values_table(lock_table);
        let t = lock_table;
        let (create, held, value) = match dialect {
            Dialect::Postgres => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {v} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
                     value TEXT NOT NULL)"
                ),
                "expires_at > clock_timestamp()",
                "CAST(? AS TEXT)",
            ),
            // VARBINARY: byte for byte, as lock names (a _bin collation pads spaces)
            Dialect::MySql => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {v} (name VARBINARY(300) NOT NULL PRIMARY KEY,
                     owner VARCHAR(255) CHARACTER SET ascii NOT NULL,
                     value VARCHAR(200) CHARACTER SET utf8mb4 NOT NULL) ENGINE=InnoDB"
                ),
                "expires_at > UTC_TIMESTAMP(6)",
                "?",
            ),
            Dialect::Sqlite => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {v} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
                     value TEXT NOT NULL) STRICT"
                ),
                "expires_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)",
                "?",
            ),
        };
        // the lock row read as it stands when the row is written — PostgreSQL: FOR
        // SHARE, so a statement that read it before a takeover committed reads it again
        // (and finds another owner); InnoDB's INSERT … SELECT share-locks what it reads;
        // SQLite writes one at a time
        let lock = if dialect == Dialect::Postgres {
            " FOR SHARE"
        } else {
            ""
        };
        let select = format!(
            "INSERT INTO {v} (name, owner, value) SELECT name, owner, {value} FROM {t}
             WHERE name = ? AND owner = ? AND token = ? AND {held}{lock}"
        );
        let proclaim = match dialect {
            Dialect::MySql => format!(
                "{select} ON DUPLICATE KEY UPDATE {v}.owner = VALUES(owner), {v}.value = VALUES(value)"
            ),
            _ => dialect.number(&format!(
                "{select} ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, value = excluded.value"
            )),
        };
        Self { create, proclaim }
    }
}

/// The holder query's join with the values table: `l` is the lock table, the value
/// the last column.
pub(crate) fn joined(lock_table: &str) -> String {
    format!(
        "{lock_table} l LEFT JOIN {v} v ON v.name = l.name AND v.owner = l.owner",
        v = values_table(lock_table)
    )
}

/// [`crate::store::ValueRows`] for a dialect's store type (with `hot` and
/// `shared.values`): the same text for every dialect.
macro_rules! value_rows {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ValueRows for $store {
            async fn proclaim(
                &self,
                name: &str,
                owner: &str,
                token: i64,
                value: &str,
            ) -> Result<bool, sqlx::Error> {
                let q = sqlx::query(AssertSqlSafe(self.shared.values.proclaim.as_str()))
                    .bind(value)
                    .bind(name)
                    .bind(owner)
                    .bind(token);
                Ok(self.hot.execute(q).await?.rows_affected() > 0)
            }
        }
    };
}
