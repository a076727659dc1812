//! A safe cleanup of the rows that distinct names leave behind.
//!
//! A name's row carries its fencing token, so it is expired on release, never deleted:
//! deleted and inserted again, its token would restart. Two rules make deleting an idle
//! row safe all the same:
//!
//! - a row is inserted with the database clock in microseconds as its first token
//!   (a semaphore's or read-write lock's grant takes at least that clock), so a name
//!   created again starts above every token it had, as long as the clock has not gone
//!   back;
//! - a row is deleted only when unheld for longer than `idle` and its token is below
//!   the clock minus `idle`: the clock would have to step back by more than `idle`
//!   for a token to repeat.
//!
//! Each statement deletes at most 1 000 rows, so no transaction holds many row
//! locks; a row an acquisition has locked is skipped (PostgreSQL) or waited for, and
//! one taken meanwhile no longer matches.

use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::within;

use crate::SqlLock;
use crate::shared::Dialect;

/// Rows deleted per statement.
pub(crate) const BATCH: u64 = 1000;

/// The longest one batch may take.
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The shortest `idle` accepted: tokens stay monotonic only while the database clock
/// does not step back by more than `idle`.
pub const MIN_IDLE: Duration = Duration::from_secs(1);

/// What [`crate::SqlLock::prune`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pruned {
    /// Rows of the lock table (mutex names).
    pub locks: u64,
    /// Rows of semaphores and read-write locks.
    pub shared: u64,
    /// Holders of semaphores and read-write locks that expired without a release.
    pub holders: u64,
    /// Queue entries of waiters that vanished without leaving (past their deadline by
    /// `idle`; a later queue change of the same name would have dropped them too).
    pub queued: u64,
}

impl Pruned {
    /// Every row deleted.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.locks + self.shared + self.holders + self.queued
    }
}

impl SqlLock {
    /// Deletes the rows of names unheld for longer than `idle` (mutexes, semaphores,
    /// read-write locks, semaphore holders that expired without a release, and queue
    /// entries of waiters that vanished without leaving), in
    /// batches, until none is left. Tokens stay monotonic as long as the database
    /// clock never steps back by more than `idle`: pick a day or more in production.
    /// Safe to run while locks are taken and released; run it from cron, e.g.
    /// `dlock prune --idle-for 7d`, often enough that each run finds a day's worth
    /// (each batch scans the table for idle rows).
    ///
    /// Every client of the table must run a dlock version with `prune` before the
    /// first prune: an older one would start a pruned name's tokens again at 1, below
    /// the tokens it had.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), dlock_core::LockError> {
    /// use std::time::Duration;
    /// let locks = dlock_sql::SqlLock::connect("sqlite:///var/lib/dlock/locks.db").await?;
    /// let pruned = locks.prune(Duration::from_secs(7 * 24 * 3600)).await?;
    /// println!("{} rows deleted", pruned.total());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for an `idle` below [`MIN_IDLE`]; the database's
    /// errors otherwise (what was deleted before stays deleted).
    ///
    /// # Cancel safety
    /// Dropping it stops between batches or rolls back the current one: every row it
    /// deleted was safe to delete.
    pub async fn prune(&self, idle: Duration) -> Result<Pruned, LockError> {
        if idle < MIN_IDLE {
            return Err(LockError::InvalidArgument(format!(
                "prune: idle must be at least {MIN_IDLE:?} (got {idle:?})"
            )));
        }
        let idle_ms = dlock_core::backend::millis(idle);
        let mut pruned = Pruned::default();
        // a batch scans the table for idle rows: more than one lock operation's time
        let timeout = self.opts.op_timeout.max(BATCH_TIMEOUT);
        let what = format!("prune on {}", self.store.kind());
        loop {
            let [locks, shared, holders, queued] = within(timeout, &what, async {
                self.store
                    .prune_batch(idle_ms)
                    .await
                    .map_err(|e| crate::errors::from_sqlx(&what, e))
            })
            .await?;
            pruned.locks += locks;
            pruned.shared += shared;
            pruned.holders += holders;
            pruned.queued += queued;
            if [locks, shared, holders, queued].iter().all(|&n| n < BATCH) {
                return Ok(pruned);
            }
        }
    }
}

/// The database clock in microseconds since the epoch, independent of any session
/// time zone: the first token of a new row.
pub(crate) fn now_us(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint",
        Dialect::MySql => {
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)"
        }
        Dialect::Sqlite => "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
    }
}

/// One batch of deletes for rows idle for longer than `idle_ms`: the lock table's,
/// the shared table's, the holders', the queue's. Integers only are formatted in, so
/// no binds.
pub(crate) fn statements(dialect: Dialect, table: &str, idle_ms: i64) -> [String; 4] {
    let (s, h) = (format!("{table}_shared"), format!("{table}_holders"));
    let q = format!("{table}_queue");
    let (us, ms) = (now_us(dialect), dialect.now_ms());
    let idle_us = idle_ms.saturating_mul(1000);
    let lock_expired = match dialect {
        Dialect::Postgres => {
            format!("expires_at < clock_timestamp() - interval '{idle_ms} milliseconds'")
        }
        Dialect::MySql => format!("expires_at < UTC_TIMESTAMP(6) - INTERVAL {idle_us} MICROSECOND"),
        Dialect::Sqlite => format!("expires_at < {ms} - {idle_ms}"),
    };
    let locks = format!("{lock_expired} AND token < {us} - {idle_us}");
    let shared = format!(
        "token < {us} - {idle_us} AND intent_until < {ms} - {idle_ms}
         AND NOT EXISTS (SELECT 1 FROM {h} WHERE {h}.name = {s}.name AND {h}.expires_at > {ms} - {idle_ms})"
    );
    let holders = format!("expires_at < {ms} - {idle_ms}");
    let queued = format!("deadline < {ms} - {idle_ms}");
    [
        (table, "name", locks),
        (s.as_str(), "name", shared),
        (h.as_str(), "name, owner", holders),
        (q.as_str(), "name, owner", queued),
    ]
    .map(|(t, key, cond)| delete_batch(dialect, t, key, &cond))
}

/// `DELETE` of at most [`BATCH`] rows of `table` (primary key `key`) matching `cond`.
fn delete_batch(dialect: Dialect, table: &str, key: &str, cond: &str) -> String {
    match dialect {
        // the rows are locked (and `cond` checked again on their latest version)
        // before the delete; rows an acquisition holds are left for the next run
        Dialect::Postgres => format!(
            "DELETE FROM {table} WHERE {cond} AND ({key}) IN
               (SELECT {key} FROM {table} WHERE {cond} LIMIT {BATCH} FOR UPDATE SKIP LOCKED)"
        ),
        // ordered, so statement-based replication deletes the same rows on replicas
        Dialect::MySql => format!("DELETE FROM {table} WHERE {cond} ORDER BY {key} LIMIT {BATCH}"),
        Dialect::Sqlite => format!(
            "DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {cond} LIMIT {BATCH})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_delete_is_bounded_and_checks_the_token() {
        for d in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            let [locks, shared, holders, queued] = statements(d, "t", 60_000);
            assert!(
                locks.contains("token <") && locks.contains("60000000"),
                "{locks}"
            );
            assert!(
                shared.contains("NOT EXISTS") && shared.contains("token <"),
                "{shared}"
            );
            assert!(queued.contains("deadline <"), "{queued}");
            for s in [&locks, &shared, &holders, &queued] {
                assert!(s.contains(&format!("LIMIT {BATCH}")), "{s}");
            }
        }
    }
}
