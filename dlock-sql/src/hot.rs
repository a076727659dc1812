//! One connection kept out of the pool for the common single-statement path.
//!
//! Every connection sqlx's pool hands out is given back on drop by a spawned task, so
//! each statement through the pool costs a wake-up of another thread besides its round
//! trip: about three times the client CPU of the same statements on a connection of
//! one's own (`dlock bench`, PostgreSQL uncontended; SQLite's pool pays the same).
//! Statements that need no transaction go to the hot connection when it is free and to
//! the pool when another caller is using it, so concurrency is still the pool's.
//!
//! Behind a transaction-mode pooler (`pooler=transaction`) each statement instead runs
//! in a transaction of its own, unprepared: sqlx sends a statement's parse and its
//! execution as two exchanges, and between them the pooler may hand the server
//! connection to another client (whose statement of the same name would run).

use sqlx::query::Query;
use sqlx::{Database, Executor, IntoArguments, Pool, pool::PoolConnection};
use tokio::sync::{Mutex, MutexGuard};

/// A statement's call (`q.$call(executor)`) on the hot connection when it is free, in a
/// transaction of its own behind a transaction pooler, on the pool otherwise.
macro_rules! on_hot {
    ($hot:ident, $q:ident, $call:ident) => {{
        if let Some((slot, mut conn)) = $hot.take().await? {
            let r = $q.$call(&mut *conn).await;
            Self::put_back(slot, conn, r.as_ref().err());
            return r;
        }
        if $hot.own_transactions {
            let mut tx = $hot.pool.begin().await?;
            let r = $q.persistent(false).$call(&mut *tx).await?;
            tx.commit().await?;
            return Ok(r);
        }
        $q.$call(&$hot.pool).await
    }};
}

/// The pool, with one of its connections held out for whoever comes when it is free.
pub(crate) struct Hot<DB: Database> {
    pool: Pool<DB>,
    slot: Mutex<Option<PoolConnection<DB>>>,
    /// Off for a pool of one connection: holding it would leave none for transactions.
    enabled: bool,
    /// Each statement in a transaction of its own, unprepared (a transaction pooler).
    own_transactions: bool,
}

impl<DB> Hot<DB>
where
    DB: Database + sqlx::database::HasStatementCache,
    <DB as Database>::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    /// `own_transactions`: behind a transaction-mode pooler (see the module doc).
    pub(crate) fn new(pool: Pool<DB>, own_transactions: bool) -> Self {
        let enabled = pool.options().get_max_connections() > 1 && !own_transactions;
        Self {
            pool,
            slot: Mutex::new(None),
            enabled,
            own_transactions,
        }
    }

    /// Whether each statement runs in a transaction of its own: statements run
    /// elsewhere must then be unprepared too (`Query::persistent(false)`).
    #[cfg(feature = "postgres")]
    pub(crate) fn own_transactions(&self) -> bool {
        self.own_transactions
    }

    /// The hot connection, taken out of its slot, if nobody is using it (from the pool
    /// the first time, and after one was dropped). It goes back with [`Hot::put_back`]
    /// once its statement completed; a statement dropped midway (a timeout, a
    /// cancelled caller) drops it with its future — back to the pool, which checks it
    /// — so a connection that may still owe a reply is never handed out hot again.
    async fn take(&self) -> Result<Option<Taken<'_, DB>>, sqlx::Error> {
        if !self.enabled {
            return Ok(None);
        }
        let Ok(mut slot) = self.slot.try_lock() else {
            return Ok(None);
        };
        let conn = match slot.take() {
            Some(c) => c,
            None => self.pool.acquire().await?,
        };
        Ok(Some((slot, conn)))
    }

    /// Returns the hot connection after a completed statement — unless the statement's
    /// error says the connection may be unusable.
    fn put_back(
        mut slot: MutexGuard<'_, Option<PoolConnection<DB>>>,
        mut conn: PoolConnection<DB>,
        err: Option<&sqlx::Error>,
    ) {
        if is_broken(err) {
            conn.close_on_drop();
        } else {
            *slot = Some(conn);
        }
    }

    /// As `Query::fetch_optional`.
    ///
    /// # Cancel safety
    /// As the statement's own: dropped after it was sent, it may or may not have run.
    /// The connection it ran on goes back to the pool, not to the hot slot.
    pub(crate) async fn fetch_optional<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Option<DB::Row>, sqlx::Error> {
        on_hot!(self, q, fetch_optional)
    }

    /// As `Query::fetch_all`.
    ///
    /// # Cancel safety
    /// As [`Hot::fetch_optional`].
    pub(crate) async fn fetch_all<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Vec<DB::Row>, sqlx::Error> {
        on_hot!(self, q, fetch_all)
    }

    /// As `Query::execute`.
    ///
    /// # Cancel safety
    /// As [`Hot::fetch_optional`].
    pub(crate) async fn execute<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<DB::QueryResult, sqlx::Error> {
        on_hot!(self, q, execute)
    }
}

/// The hot slot, locked and emptied, and the connection that was in it.
type Taken<'a, DB> = (
    MutexGuard<'a, Option<PoolConnection<DB>>>,
    PoolConnection<DB>,
);

/// Whether an error may have left the connection unusable (it is closed then, and the
/// next caller takes a fresh one from the pool); a statement's own error leaves it be.
/// A server that ends the session says so first (SQLSTATE class 57P, operator
/// intervention, or 08, connection exception): the connection is dropped at that
/// message rather than at the closed socket the call after it would meet.
fn is_broken(err: Option<&sqlx::Error>) -> bool {
    err.is_some_and(crate::errors::is_broken)
}
