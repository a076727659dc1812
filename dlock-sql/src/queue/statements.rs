//! The queue's statements for one dialect and table: the queue table's, written once
//! with `?` placeholders, and the lock row's, which differ by how each dialect keeps
//! expiry (PostgreSQL `TIMESTAMPTZ`, MySQL `DATETIME(6)`, SQLite ms).

use super::fragments::{grant_ttl, listening, release_channel};
use crate::shared::Dialect;

/// Every statement of the queue for one dialect and lock table.
pub(crate) struct QueueSql {
    pub create: Vec<String>,
    /// Creates the name's lock row if missing (free) and locks it; the last statement
    /// returns `owner, remaining_ms, now_ms`. Binds the name to each.
    pub lock_row: Vec<String>,
    /// Writes a holder (`owner`, `ttl_ms`, `name`) with the next token.
    pub set_holder: String,
    /// Whether `set_holder` returns the token (MySQL: read with `token` after it).
    pub set_holder_returns: bool,
    /// The row's token (`name`).
    pub token: String,
    /// Extends a grant to the waiter (`ttl_ms`, `name`, `owner`); its expiry never
    /// goes back.
    pub confirm: String,
    /// Frees the row if `owner` holds it (`name`, `owner`).
    pub give_back: String,
    /// Drops the entries of `name` past their deadline (`name`, `now_ms`).
    pub purge: String,
    /// The oldest live entry of `name` (`name`, `now_ms`, whether it waits for the
    /// exclusive lock): `owner, ttl_ms, channel, access, permits`; PostgreSQL passes
    /// over one whose LISTEN connection is gone. (An exclusive lock may be named like a
    /// semaphore's key, `sem:<name>`: the kinds queue apart.)
    pub head: String,
    /// The highest `seq` of `name` (0 when none).
    pub last_seq: String,
    /// Joins, or moves an entry's deadline: `name, owner, seq, access, permits,
    /// ttl_ms, deadline, listener, channel` (an entry's `seq` never changes).
    pub join: String,
    /// Leaves (`name`, `owner`).
    pub leave: String,
    /// Whether the lock table has its `queued_until` column: a count (no parameters:
    /// the table name is checked, and the simple protocol passes a transaction
    /// pooler).
    pub has_column: String,
    /// Adds it to a lock table created before the queue.
    pub add_column: String,
    /// Sets the lock row's `queued_until` to the latest deadline of `name`'s live
    /// entries, or 0 (`name`, `now_ms`, `name`): the lock table's own statements read
    /// it under the row's lock — a release learns whether anyone waits, an acquire
    /// that nobody does — so whoever changes the queue keeps it true.
    pub sync_queued: String,
    /// PostgreSQL: `pg_notify` of a grant (`channel`, payload).
    pub notify: Option<String>,
    /// PostgreSQL: the two transactions as one call each (`super::calls`).
    pub calls: Option<super::calls::QueueCalls>,
    /// PostgreSQL: tells observers (leader watches) that `name` changed hands, on the
    /// table's release channel (`name`).
    pub tell_observers: Option<String>,
}

impl QueueSql {
    pub(crate) fn new(dialect: Dialect, table: &str) -> Self {
        let q = format!("{table}_queue");
        let now = dialect.now_ms();
        let first = crate::prune::now_us(dialect);
        let n = |sql: String| dialect.number(&sql);
        let create = match dialect {
            Dialect::Postgres => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {q} (name TEXT NOT NULL, owner TEXT NOT NULL,
                     seq BIGINT NOT NULL, access TEXT NOT NULL, permits BIGINT NOT NULL,
                     ttl_ms BIGINT NOT NULL, deadline BIGINT NOT NULL,
                     listener BIGINT NOT NULL DEFAULT 0, channel TEXT NOT NULL DEFAULT '',
                     PRIMARY KEY (name, owner))"
                ),
                format!("CREATE INDEX IF NOT EXISTS {table}_qseq ON {q} (name, seq)"),
            ]
            .into_iter()
            .chain(super::calls::create(table))
            .collect(),
            Dialect::MySql => vec![format!(
                "CREATE TABLE IF NOT EXISTS {q} (name VARBINARY(300) NOT NULL,
                 owner VARCHAR(255) CHARACTER SET ascii NOT NULL, seq BIGINT NOT NULL,
                 access VARCHAR(8) CHARACTER SET ascii NOT NULL, permits BIGINT NOT NULL,
                 ttl_ms BIGINT NOT NULL, deadline BIGINT NOT NULL,
                 listener BIGINT NOT NULL DEFAULT 0,
                 channel VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '',
                 PRIMARY KEY (name, owner), KEY {table}_qseq (name, seq)) ENGINE=InnoDB"
            )],
            Dialect::Sqlite => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {q} (name TEXT NOT NULL, owner TEXT NOT NULL,
                     seq INTEGER NOT NULL, access TEXT NOT NULL, permits INTEGER NOT NULL,
                     ttl_ms INTEGER NOT NULL, deadline INTEGER NOT NULL,
                     listener INTEGER NOT NULL DEFAULT 0, channel TEXT NOT NULL DEFAULT '',
                     PRIMARY KEY (name, owner)) STRICT"
                ),
                format!("CREATE INDEX IF NOT EXISTS {table}_qseq ON {q} (name, seq)"),
            ],
        };
        let (lock_row, set_holder, confirm, give_back) = match dialect {
            Dialect::Postgres => {
                let left = "GREATEST(0, CEIL(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000))::bigint";
                (
                    vec![format!(
                        "INSERT INTO {table} AS d (name, owner, token, expires_at)
                         VALUES (?, '', {first}, clock_timestamp())
                         ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
                         RETURNING d.owner, {left}, {now}"
                    )],
                    format!(
                        "UPDATE {table} SET owner = ?, token = GREATEST(token + 1, {first}),
                           expires_at = clock_timestamp() + ? * interval '1 millisecond'
                         WHERE name = ? RETURNING token"
                    ),
                    format!(
                        "UPDATE {table} SET expires_at = GREATEST(expires_at,
                           clock_timestamp() + ? * interval '1 millisecond')
                         WHERE name = ? AND owner = ?"
                    ),
                    format!(
                        "UPDATE {table} SET owner = '', expires_at = clock_timestamp()
                         WHERE name = ? AND owner = ? AND expires_at > clock_timestamp()"
                    ),
                )
            }
            Dialect::MySql => {
                let t = "UTC_TIMESTAMP(6)";
                let left = format!(
                    "GREATEST(0, CAST(CEIL(TIMESTAMPDIFF(MICROSECOND, {t}, expires_at) / 1000) AS SIGNED))"
                );
                (
                    vec![
                        format!(
                            "INSERT INTO {table} (name, owner, token, expires_at)
                             VALUES (?, '', {first}, {t}) ON DUPLICATE KEY UPDATE name = name"
                        ),
                        format!(
                            "SELECT owner, {left}, {now} FROM {table} WHERE name = ? FOR UPDATE"
                        ),
                    ],
                    format!(
                        "UPDATE {table} SET owner = ?, token = GREATEST(token + 1, {first}),
                           expires_at = {t} + INTERVAL ? * 1000 MICROSECOND WHERE name = ?"
                    ),
                    format!(
                        "UPDATE {table} SET expires_at = GREATEST(expires_at,
                           {t} + INTERVAL ? * 1000 MICROSECOND) WHERE name = ? AND owner = ?"
                    ),
                    format!(
                        "UPDATE {table} SET owner = '', expires_at = {t}
                         WHERE name = ? AND owner = ? AND expires_at > {t}"
                    ),
                )
            }
            Dialect::Sqlite => (
                vec![format!(
                    "INSERT INTO {table} (name, owner, token, expires_at)
                     VALUES (?, '', {first}, {now})
                     ON CONFLICT (name) DO UPDATE SET name = excluded.name
                     RETURNING owner, MAX(0, expires_at - {now}), {now}"
                )],
                format!(
                    "UPDATE {table} SET owner = ?, token = MAX(token + 1, {first}),
                       expires_at = {now} + ? WHERE name = ? RETURNING token"
                ),
                format!(
                    "UPDATE {table} SET expires_at = MAX(expires_at, {now} + ?)
                     WHERE name = ? AND owner = ?"
                ),
                format!(
                    "UPDATE {table} SET owner = '', expires_at = {now}
                     WHERE name = ? AND owner = ? AND expires_at > {now}"
                ),
            ),
        };
        // a waiter whose LISTEN connection is gone (a killed process: the server saw
        // its socket close) is passed over at once, not at its deadline
        let alive = listening(dialect, &q);
        let join = match dialect {
            Dialect::MySql => format!(
                "INSERT INTO {q} (name, owner, seq, access, permits, ttl_ms, deadline, listener, channel)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE
                 access = VALUES(access), permits = VALUES(permits), ttl_ms = VALUES(ttl_ms),
                 deadline = VALUES(deadline), listener = VALUES(listener),
                 channel = VALUES(channel)"
            ),
            _ => format!(
                "INSERT INTO {q} (name, owner, seq, access, permits, ttl_ms, deadline, listener, channel)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name, owner) DO UPDATE
                 SET access = excluded.access, permits = excluded.permits, ttl_ms = excluded.ttl_ms, deadline = excluded.deadline,
                 listener = excluded.listener, channel = excluded.channel"
            ),
        };
        let (has_column, add_column) = match dialect {
            Dialect::Postgres => (
                format!(
                    "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
                     AND table_name = '{table}' AND column_name = 'queued_until'"
                ),
                format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS queued_until BIGINT NOT NULL DEFAULT 0"),
            ),
            Dialect::MySql => (
                format!(
                    "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.COLUMNS
                     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}'
                     AND COLUMN_NAME = 'queued_until'"
                ),
                format!("ALTER TABLE {table} ADD COLUMN queued_until BIGINT NOT NULL DEFAULT 0"),
            ),
            Dialect::Sqlite => (
                format!("SELECT COUNT(*) FROM pragma_table_info('{table}') WHERE name = 'queued_until'"),
                format!("ALTER TABLE {table} ADD COLUMN queued_until INTEGER NOT NULL DEFAULT 0"),
            ),
        };
        Self {
            has_column,
            add_column,
            sync_queued: n(format!(
                "UPDATE {table} SET queued_until = COALESCE((SELECT MAX(q.deadline) FROM {q} q
                   WHERE q.name = ? AND q.deadline >= ? AND q.access = 'x'), 0) WHERE name = ?"
            )),
            create,
            lock_row: lock_row.into_iter().map(n).collect(),
            set_holder: n(set_holder),
            set_holder_returns: dialect != Dialect::MySql,
            token: n(format!("SELECT token FROM {table} WHERE name = ?")),
            confirm: n(confirm),
            give_back: n(give_back),
            purge: n(format!("DELETE FROM {q} WHERE name = ? AND deadline < ?")),
            head: n(format!(
                "SELECT owner, {grant_ttl}, channel, access, permits FROM {q} WHERE name = ?
                 AND deadline >= ? AND (access = 'x') = ?{alive} ORDER BY seq LIMIT 1",
                grant_ttl = grant_ttl(dialect, "")
            )),
            last_seq: n(format!(
                "SELECT COALESCE(MAX(seq), 0) FROM {q} WHERE name = ?"
            )),
            join: n(join),
            leave: n(format!("DELETE FROM {q} WHERE name = ? AND owner = ?")),
            notify: (dialect == Dialect::Postgres).then(|| n("SELECT pg_notify(?, ?)".into())),
            calls: (dialect == Dialect::Postgres).then(|| super::calls::QueueCalls::new(table)),
            tell_observers: (dialect == Dialect::Postgres)
                .then(|| n(format!("SELECT pg_notify('{}', ?)", release_channel(table)))),
        }
    }

    /// The condition, for the lock table's own statements, that nobody waits for
    /// the row (its `queued_until`, read under the row's lock, is past): an attempt
    /// never passes a live queue. A queued waiter takes a free lock only in the
    /// queue's transaction (which also removes its entry), or as a grant.
    pub(crate) fn nobody_queued(dialect: Dialect, row: &str) -> String {
        format!("{row}queued_until < {now}", now = dialect.now_ms())
    }

    /// The owner id of the oldest live waiter for `name_expr` (a column of the
    /// statement it goes in), or NULL: what the shared tables' head statement returns
    /// beside the head row, so an acquisition with nobody queued reads nothing more.
    pub(crate) fn first_in_line(dialect: Dialect, table: &str, name_expr: &str) -> String {
        format!(
            "(SELECT q.owner FROM {table}_queue q WHERE q.name = {name_expr}
              AND q.deadline >= {now} AND q.access <> 'x'{alive} ORDER BY q.seq LIMIT 1)",
            now = dialect.now_ms(),
            alive = listening(dialect, "q"),
        )
    }

    /// The condition that someone waits for the row.
    pub(crate) fn someone_queued(dialect: Dialect, row: &str) -> String {
        format!("{row}queued_until >= {now}", now = dialect.now_ms())
    }
}
