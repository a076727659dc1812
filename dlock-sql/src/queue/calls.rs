//! PostgreSQL: the queue's transactions as server-side functions, so that a waiter's
//! attempt, a release's grant and a release that grants are one round trip each
//! instead of eight and eleven — the name's row lock is held for the time the server
//! needs, not for as many round trips (a hand-off serialises on that row lock).
//!
//! Each function does, statement for statement, what `flow.rs` does in a transaction
//! (it stays the reference and the path of MySQL and SQLite): under READ COMMITTED a
//! PL/pgSQL statement reads a fresh snapshot, so every read after the first statement's
//! row lock sees whatever committed before that lock was granted, as in the
//! transaction. They are created with the tables; a schema made by hand without them
//! still works (the client falls back to the transactions, see [`QueueCalls`]).
//!
//! The names carry a version (`…_qtake1`): a later change to a body gets a new name,
//! so clients of two versions never replace each other's function.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The SQLSTATE of a call to a function that does not exist.
const UNDEFINED_FUNCTION: &str = "42883";

/// How long a client that found the functions missing runs the transactions before it
/// calls them again (another process's `migrate` may create them meanwhile).
const MISSING_FOR: Duration = Duration::from_secs(60);

/// The calls of the functions, and whether they are there to call.
pub(crate) struct QueueCalls {
    /// A waiter's attempt: `(name, owner, ttl_ms, live_ms, listener, channel, joins)` →
    /// one row `(token, remaining_ms, counter)`: a token when taken, else the holder's
    /// remaining time and the row's token then.
    pub take: String,
    /// A grant after a release, or a waiter's leave: `(name, giving_up)` (`''` for
    /// none).
    pub grant: String,
    /// A release that grants in the same call: `(name, owner, token)` → whether the
    /// row was the caller's.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub release: String,
    /// When a call last found its function missing (a schema made by hand): the
    /// client then runs the transactions for [`MISSING_FOR`].
    missing_since: Mutex<Option<Instant>>,
}

impl QueueCalls {
    pub(crate) fn new(table: &str) -> Self {
        Self {
            take: format!(
                "SELECT o_token, o_left, o_counter FROM {table}_qtake1($1, $2, $3, $4, $5, $6, $7)"
            ),
            grant: format!("SELECT {table}_qgrant1($1, $2)"),
            release: format!("SELECT {table}_qrelease1($1, $2, $3)"),
            missing_since: Mutex::new(None),
        }
    }

    /// Whether to call the functions.
    pub(crate) fn present(&self) -> bool {
        let since = self
            .missing_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        since.is_none_or(|at| at.elapsed() >= MISSING_FOR)
    }

    /// Whether `e` says a function is missing; if so, stops calling them for a while.
    pub(crate) fn missing(&self, e: &sqlx::Error) -> bool {
        let undefined = e
            .as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|c| c == UNDEFINED_FUNCTION);
        if undefined {
            tracing::warn!(
                error = %e,
                "the queue's functions are missing (a schema made by hand?); \
                 queue changes run as transactions of several statements"
            );
            *self
                .missing_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
        undefined
    }
}

/// The calls, for a dialect's `TxParts` (expanded by `queue_store!`; only PostgreSQL
/// has the functions). Behind a transaction-mode pooler a call runs in a transaction
/// of its own, so that its parse and its execution reach one server connection.
macro_rules! queue_calls {
    ($pool:ty, $db:ty) => {
        impl $crate::queue::TxParts<$db> {
            /// A waiter's attempt as one call (`QueueCalls::take`).
            async fn call_take(
                &self,
                pool: &$pool,
                call: &str,
                req: &$crate::queue::QueueRequest,
            ) -> Result<$crate::queue::Queued, sqlx::Error> {
                use sqlx::Row;
                let query = self
                    .q(call)
                    .bind(req.name.as_str())
                    .bind(req.owner.as_str())
                    .bind(dlock_core::backend::millis(req.ttl))
                    .bind(dlock_core::backend::millis(req.live))
                    .bind(req.listener.0)
                    .bind(req.listener.1.as_str())
                    .bind(req.joins);
                let mut conn = pool.acquire().await?;
                let row = if self.persistent {
                    query.fetch_one(&mut *conn).await?
                } else {
                    let mut tx = self.begin(&mut conn).await?;
                    let row = query.fetch_one(&mut *tx).await?;
                    tx.commit().await?;
                    row
                };
                Ok(match row.try_get::<Option<i64>, _>(0)? {
                    Some(token) => $crate::queue::Queued::Taken(token),
                    None => $crate::queue::Queued::Waiting {
                        remaining: dlock_core::backend::from_millis(row.try_get(1)?),
                        counter: row
                            .try_get::<Option<i64>, _>(2)?
                            .and_then(|c| u64::try_from(c).ok()),
                    },
                })
            }

            /// A grant, or a leave, as one call (`QueueCalls::grant`).
            async fn call_grant(
                &self,
                pool: &$pool,
                call: &str,
                name: &str,
                giving_up: Option<&str>,
            ) -> Result<(), sqlx::Error> {
                let query = self.q(call).bind(name).bind(giving_up.unwrap_or(""));
                let mut conn = pool.acquire().await?;
                if self.persistent {
                    query.execute(&mut *conn).await?;
                } else {
                    let mut tx = self.begin(&mut conn).await?;
                    query.execute(&mut *tx).await?;
                    tx.commit().await?;
                }
                Ok(())
            }
        }
    };
}

/// The `CREATE OR REPLACE FUNCTION` statements (run by `migrate`, under its lock).
///
/// Besides the round trips, they spare the name's row new versions (a row updated
/// thousands of times a second drags a chain of dead versions): the row is locked
/// with `FOR UPDATE`, not rewritten; a grant writes the holder and `queued_until` in
/// one update; and `queued_until` is written with slack — the latest deadline plus as
/// long again — so that a waiter's heartbeats within that window write nothing. It
/// stays at or above every live deadline (an acquire never passes a live waiter); the
/// slack only sends an attempt to the queue's path for a while after the last waiter
/// vanished without leaving, where it takes the lock anyway.
pub(crate) fn create(table: &str) -> Vec<String> {
    let q = format!("{table}_queue");
    let now = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";
    let first = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint";
    let left =
        "GREATEST(0, CEIL(EXTRACT(EPOCH FROM (d.expires_at - clock_timestamp())) * 1000))::bigint";
    // a waiter whose LISTEN connection is gone (the server released its mark when its
    // socket closed) is passed over at once, as in `statements.rs`
    let alive = super::fragments::listening_sql("h");
    // the name's row, created free if missing, locked for the transaction
    let read_row = format!(
        "SELECT d.owner, {left}, {now}, d.token, d.queued_until
           INTO r_owner, r_left, r_now, r_token, r_queued
           FROM {table} d WHERE d.name = p_name FOR UPDATE;"
    );
    let lock_row = format!(
        "{read_row}
         IF NOT FOUND THEN
           INSERT INTO {table} (name, owner, token, expires_at)
             VALUES (p_name, '', {first}, clock_timestamp()) ON CONFLICT (name) DO NOTHING;
           {read_row}
         END IF;"
    );
    // the oldest live entry, after the dead ones are dropped
    let grant_ttl = super::fragments::grant_ttl(crate::shared::Dialect::Postgres, "h.");
    let head = format!(
        "DELETE FROM {q} h WHERE h.name = p_name AND h.deadline < r_now;
         SELECT h.owner, {grant_ttl}, h.channel INTO h_owner, h_ttl, h_channel FROM {q} h
           WHERE h.name = p_name AND h.deadline >= r_now AND h.access = 'x'{alive}
           ORDER BY h.seq LIMIT 1;"
    );
    // `queued_until` for the entries now: 0 when none, else with its slack
    let queued = format!(
        "v_last := COALESCE((SELECT MAX(h.deadline) FROM {q} h
           WHERE h.name = p_name AND h.deadline >= r_now AND h.access = 'x'), 0);
         v_queued := CASE WHEN v_last = 0 THEN 0 ELSE 2 * v_last - r_now END;"
    );
    // written only when a deadline passed it, or to clear it when nobody is left
    let sync_queued = format!(
        "{queued}
         IF v_last > r_queued OR (v_last = 0 AND r_queued <> 0) THEN
           UPDATE {table} d SET queued_until = v_queued WHERE d.name = p_name;
         END IF;"
    );
    let vars = "r_owner text; r_left bigint; r_now bigint; r_token bigint; r_queued bigint;
                h_owner text; h_ttl bigint; h_channel text; v_last bigint; v_queued bigint;";
    vec![
        // writes a waiter as the holder with the next token (and `queued_until`, in the
        // same update), removes its entry and tells it on its own channel, and
        // observers on the table's; the row is locked by the caller
        format!(
            "CREATE OR REPLACE FUNCTION {table}_qgive1(p_name text, p_owner text,
               p_ttl_ms bigint, p_channel text, r_now bigint) RETURNS bigint
             LANGUAGE plpgsql AS $f$
             DECLARE t bigint; v_last bigint; v_queued bigint;
             BEGIN
               DELETE FROM {q} h WHERE h.name = p_name AND h.owner = p_owner;
               {queued}
               UPDATE {table} d SET owner = p_owner, token = GREATEST(d.token + 1, {first}),
                 expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
                 queued_until = v_queued
                 WHERE d.name = p_name RETURNING d.token INTO t;
               IF p_channel <> '' THEN
                 PERFORM pg_notify(p_channel, p_owner || ' ' || t);
               END IF;
               PERFORM pg_notify('{observers}', p_name);
               RETURN t;
             END $f$",
            observers = super::release_channel(table),
        ),
        // a waiter's attempt: `queue::step` decides, as in `flow.rs`'s wait_take_once
        format!(
            "CREATE OR REPLACE FUNCTION {table}_qtake1(p_name text, p_owner text,
               p_ttl_ms bigint, p_live_ms bigint, p_listener bigint, p_channel text,
               p_joins boolean, OUT o_token bigint, OUT o_left bigint, OUT o_counter bigint)
             LANGUAGE plpgsql AS $f$
             DECLARE {vars}
             BEGIN
               {lock_row}
               {head}
               o_left := r_left;
               o_counter := r_token;
               IF (r_left > 0 AND r_owner = p_owner)
                  OR (r_left <= 0 AND (h_owner IS NULL OR h_owner = p_owner)) THEN
                 -- a grant to confirm (its expiry never goes back), or a free lock it
                 -- is first for (the next token): it leaves the queue
                 DELETE FROM {q} h WHERE h.name = p_name AND h.owner = p_owner;
                 {queued}
                 IF r_left > 0 THEN
                   UPDATE {table} d SET expires_at = GREATEST(d.expires_at,
                       clock_timestamp() + p_ttl_ms * interval '1 millisecond'),
                     queued_until = v_queued
                     WHERE d.name = p_name RETURNING d.token INTO o_token;
                 ELSE
                   UPDATE {table} d SET owner = p_owner,
                     token = GREATEST(d.token + 1, {first}),
                     expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
                     queued_until = v_queued
                     WHERE d.name = p_name RETURNING d.token INTO o_token;
                 END IF;
               ELSE
                 IF p_joins THEN
                   -- join at the end, or move the entry's deadline on (its seq stays)
                   INSERT INTO {q} AS h (name, owner, seq, access, permits, ttl_ms,
                     deadline, listener, channel)
                   VALUES (p_name, p_owner, COALESCE((SELECT MAX(s.seq) FROM {q} s
                     WHERE s.name = p_name), 0) + 1, 'x', 0, p_ttl_ms, r_now + p_live_ms,
                     p_listener, p_channel)
                   ON CONFLICT (name, owner) DO UPDATE SET access = EXCLUDED.access,
                     permits = EXCLUDED.permits, ttl_ms = EXCLUDED.ttl_ms,
                     deadline = EXCLUDED.deadline, listener = EXCLUDED.listener,
                     channel = EXCLUDED.channel;
                 END IF;
                 IF r_left <= 0 THEN
                   -- free, and another is first: the head gets it (after this
                   -- waiter's entry is in, so `queued_until` counts it)
                   o_counter := {table}_qgive1(p_name, h_owner, h_ttl, h_channel, r_now);
                   o_left := h_ttl;
                 ELSE
                   {sync_queued}
                 END IF;
               END IF;
             END $f$"
        ),
        // a release that grants: the row goes from the holder straight to the head (one
        // new version), or is freed and observers told, as the release statement does
        format!(
            "CREATE OR REPLACE FUNCTION {table}_qrelease1(p_name text, p_owner text,
               p_token bigint) RETURNS boolean LANGUAGE plpgsql AS $f$
             DECLARE {vars}
             BEGIN
               {read_row}
               IF NOT FOUND OR r_owner <> p_owner OR r_token <> p_token OR r_left <= 0 THEN
                 RETURN false;
               END IF;
               {head}
               IF h_owner IS NOT NULL THEN
                 PERFORM {table}_qgive1(p_name, h_owner, h_ttl, h_channel, r_now);
               ELSE
                 {queued}
                 UPDATE {table} d SET owner = '', expires_at = clock_timestamp(),
                   queued_until = v_queued WHERE d.name = p_name;
                 PERFORM pg_notify('{observers}', p_name);
               END IF;
               RETURN true;
             END $f$",
            observers = super::release_channel(table),
        ),
        // after a release that found waiters, or a waiter's leave (which gives back a
        // grant it never took): the free lock goes to the head
        format!(
            "CREATE OR REPLACE FUNCTION {table}_qgrant1(p_name text, p_giving_up text)
             RETURNS void LANGUAGE plpgsql AS $f$
             DECLARE {vars}
             BEGIN
               {lock_row}
               IF p_giving_up <> '' THEN
                 DELETE FROM {q} h WHERE h.name = p_name AND h.owner = p_giving_up;
                 IF r_left > 0 AND r_owner = p_giving_up THEN
                   UPDATE {table} d SET owner = '', expires_at = clock_timestamp()
                     WHERE d.name = p_name;
                   r_left := 0;
                 END IF;
               END IF;
               IF r_left <= 0 THEN
                 {head}
                 IF h_owner IS NOT NULL THEN
                   PERFORM {table}_qgive1(p_name, h_owner, h_ttl, h_channel, r_now);
                   RETURN;
                 END IF;
                 -- free, and nobody live waits: observers hear it as after a release
                 PERFORM pg_notify('{observers}', p_name);
               END IF;
               {sync_queued}
             END $f$",
            observers = super::release_channel(table),
        ),
    ]
}
