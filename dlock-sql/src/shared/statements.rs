//! The shared tables' statements, written once with `?` placeholders and the
//! dialect's clock, then numbered for PostgreSQL.

/// The SQL dialect a statement is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    MySql,
    Sqlite,
}

impl Dialect {
    /// The database clock in milliseconds since the epoch, independent of any session
    /// time zone.
    pub(crate) fn now_ms(self) -> &'static str {
        match self {
            Self::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint",
            Self::MySql => {
                "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
            }
            Self::Sqlite => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        }
    }

    /// `?` placeholders as the dialect wants them (`$1`, `$2`, … for PostgreSQL).
    pub(crate) fn number(self, sql: &str) -> String {
        if self != Self::Postgres {
            return sql.to_owned();
        }
        let mut out = String::with_capacity(sql.len() + 8);
        let mut n = 0;
        for c in sql.chars() {
            if c == '?' {
                n += 1;
                out.push_str(&format!("${n}"));
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// Every statement of the shared tables for one dialect and table name.
pub(crate) struct SharedSql {
    pub dialect: Dialect,
    /// Whether statements run in a transaction may be prepared once and kept: not
    /// behind a transaction pooler (see `crate::hot`).
    pub persistent: bool,
    /// The lock table these tables go with.
    pub table: String,
    /// The idempotency records' statements.
    pub results: crate::results::ResultSql,
    /// The proclaimed values' statements.
    pub values: crate::values::ValueSql,
    pub create: Vec<String>,
    /// Run on the connection before `BEGIN` (MySQL: READ COMMITTED, so the holder
    /// table's deletes and inserts take no gap locks that could deadlock acquisitions of
    /// different names; every decision is made under the name's row lock anyway).
    pub before_begin: Option<String>,
    /// Locks (creating if needed) the head row; the last statement returns
    /// `token, permits, intent_until, now, first in line`.
    pub head: Vec<String>,
    pub purge: String,
    pub list: String,
    pub retake: String,
    pub grant_head: String,
    pub insert_holder: String,
    /// A waiting writer's intent (`key`, `owner`, until ms), for clients that do
    /// not queue.
    pub intent: String,
    pub renew: String,
    /// Removes a holder row of `owner` (`key`, `owner`): a grant it never took.
    pub give_back: String,
    /// Removes a holder (`key`, `owner`, `token`), in the name's transaction.
    pub release: String,
    pub holders: String,
    /// The unexpired holders of every key starting with one of two prefixes (each
    /// bound twice), with their keys.
    pub listed: String,
}

impl SharedSql {
    pub(crate) fn new(dialect: Dialect, table: &str) -> Self {
        let (s, h, now) = (
            format!("{table}_shared"),
            format!("{table}_holders"),
            dialect.now_ms(),
        );
        let mut create = match dialect {
            Dialect::Postgres => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {s} (name TEXT PRIMARY KEY,
                     token BIGINT NOT NULL DEFAULT 0, permits BIGINT NOT NULL DEFAULT 0,
                     intent_until BIGINT NOT NULL DEFAULT 0)"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {h} (name TEXT NOT NULL, owner TEXT NOT NULL,
                     access TEXT NOT NULL, token BIGINT NOT NULL, expires_at BIGINT NOT NULL,
                     PRIMARY KEY (name, owner))"
                ),
            ],
            // VARBINARY: names compare byte for byte, as in the lock table (a _bin
            // collation pads spaces: 'pool' and 'pool ' would be one name)
            Dialect::MySql => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {s} (
                     name VARBINARY(300) NOT NULL PRIMARY KEY,
                     token BIGINT NOT NULL DEFAULT 0, permits BIGINT NOT NULL DEFAULT 0,
                     intent_until BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {h} (
                     name VARBINARY(300) NOT NULL,
                     owner VARCHAR(255) CHARACTER SET ascii NOT NULL,
                     access VARCHAR(8) CHARACTER SET ascii NOT NULL, token BIGINT NOT NULL,
                     expires_at BIGINT NOT NULL, PRIMARY KEY (name, owner)) ENGINE=InnoDB"
                ),
            ],
            Dialect::Sqlite => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {s} (name TEXT PRIMARY KEY,
                     token INTEGER NOT NULL DEFAULT 0, permits INTEGER NOT NULL DEFAULT 0,
                     intent_until INTEGER NOT NULL DEFAULT 0) STRICT"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {h} (name TEXT NOT NULL, owner TEXT NOT NULL,
                     access TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL,
                     PRIMARY KEY (name, owner)) STRICT"
                ),
            ],
        };
        create.push(crate::fence::create(dialect, table));
        let results = crate::results::ResultSql::new(dialect, table);
        create.push(results.create.clone());
        let values = crate::values::ValueSql::new(dialect, table);
        create.push(values.create.clone());
        // A write first, so the row lock (SQLite: the write lock) is taken before
        // anything is read: no upgrade from a read snapshot can fail later.
        // and who is first in line, if anyone (`crate::queue`)
        let first = crate::queue::QueueSql::first_in_line(dialect, table, &format!("{s}.name"));
        let head = match dialect {
            Dialect::MySql => vec![
                format!("INSERT INTO {s} (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name"),
                format!(
                    "SELECT token, permits, intent_until, {now}, {first} FROM {s} WHERE name = ? FOR UPDATE"
                ),
            ],
            // PostgreSQL: who is first in line is read by a statement of its own once
            // the row is locked — a statement that waited for the lock reads other
            // tables as they were before it waited, and would miss a waiter that
            // joined meanwhile (its release would then grant nobody)
            Dialect::Postgres => vec![
                format!(
                    "INSERT INTO {s} (name) VALUES (?) ON CONFLICT (name) DO UPDATE SET name = excluded.name"
                ),
                format!(
                    "SELECT token, permits, intent_until, {now}, {first} FROM {s} WHERE name = ?"
                ),
            ],
            Dialect::Sqlite => vec![format!(
                "INSERT INTO {s} (name) VALUES (?) ON CONFLICT (name) DO UPDATE SET name = excluded.name
                 RETURNING token, permits, intent_until, {now}, {first}"
            )],
        };
        // run under the head row's lock (see `crate::shared::grants`)
        let release = format!(
            "DELETE FROM {h} WHERE name = ? AND owner = ? AND token = ? AND expires_at > {now}"
        );
        let n = |sql: String| dialect.number(&sql);
        Self {
            dialect,
            persistent: true,
            table: table.to_owned(),
            results,
            values,
            create,
            before_begin: (dialect == Dialect::MySql)
                .then(|| "SET TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned()),
            head: head.into_iter().map(n).collect(),
            purge: n(format!(
                "DELETE FROM {h} WHERE name = ? AND expires_at <= ?"
            )),
            list: n(format!(
                "SELECT owner, access, token, expires_at FROM {h} WHERE name = ? ORDER BY token"
            )),
            retake: n(format!(
                "UPDATE {h} SET expires_at = ? WHERE name = ? AND owner = ?"
            )),
            grant_head: n(format!(
                "UPDATE {s} SET token = ?, permits = ?, intent_until = ? WHERE name = ?"
            )),
            // a writer's grant takes the place of its own intent row, if it left one
            insert_holder: n(match dialect {
                Dialect::MySql => format!(
                    "INSERT INTO {h} (name, owner, access, token, expires_at) VALUES (?, ?, ?, ?, ?)
                     ON DUPLICATE KEY UPDATE access = VALUES(access), token = VALUES(token),
                     expires_at = VALUES(expires_at)"
                ),
                _ => format!(
                    "INSERT INTO {h} (name, owner, access, token, expires_at) VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (name, owner) DO UPDATE SET access = excluded.access,
                     token = excluded.token, expires_at = excluded.expires_at"
                ),
            }),
            // a waiting writer of a client that does not queue keeps readers out with
            // an intent: a row of its own (access 'i', token 0), lapsing at
            // expires_at; a writer's grant removes only its own
            intent: n(match dialect {
                Dialect::MySql => format!(
                    "INSERT INTO {h} (name, owner, access, token, expires_at) VALUES (?, ?, 'i', 0, ?)
                     ON DUPLICATE KEY UPDATE expires_at = IF(access = 'i', VALUES(expires_at), expires_at)"
                ),
                _ => format!(
                    "INSERT INTO {h} (name, owner, access, token, expires_at) VALUES (?, ?, 'i', 0, ?)
                     ON CONFLICT (name, owner) DO UPDATE SET expires_at = excluded.expires_at
                     WHERE {h}.access = 'i'"
                ),
            }),
            renew: n(format!(
                "UPDATE {h} SET expires_at = {now} + ? WHERE name = ? AND owner = ? AND token = ?
                 AND expires_at > {now}"
            )),
            give_back: n(format!("DELETE FROM {h} WHERE name = ? AND owner = ?")),
            release: n(release),
            holders: n(format!(
                "SELECT h.owner, h.access, h.token, h.expires_at - {now}, s.permits
                 FROM {h} h JOIN {s} s ON s.name = h.name
                 WHERE h.name = ? AND h.expires_at > {now} AND h.access <> 'i'
                 ORDER BY h.token"
            )),
            listed: n(format!(
                "SELECT {key}, h.owner, h.access, h.token, h.expires_at - {now}, s.permits
                 FROM {h} h JOIN {s} s ON s.name = h.name
                 WHERE (substr(h.name, 1, length(?)) = ? OR substr(h.name, 1, length(?)) = ?)
                 AND h.expires_at > {now} AND h.access <> 'i'
                 ORDER BY h.name, h.token",
                // MySQL keeps names as bytes (VARBINARY)
                key = match dialect {
                    Dialect::MySql => "CONVERT(h.name USING utf8mb4)",
                    _ => "h.name",
                }
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered_in_order() {
        let sql = SharedSql::new(Dialect::Postgres, "t");
        assert!(
            sql.release
                .contains("name = $1 AND owner = $2 AND token = $3")
        );
        let my = SharedSql::new(Dialect::MySql, "t");
        assert!(my.renew.contains("name = ? AND owner = ?"));
        assert_eq!(my.head.len(), 2);
    }
}
