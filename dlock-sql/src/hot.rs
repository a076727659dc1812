//! One connection kept out of the pool for the common single-statement path.
//!
//! Every connection sqlx's pool hands out is given back on drop by a spawned task, so
//! each statement through the pool costs a wake-up of another thread besides its round
//! trip: about three times the client CPU of the same statements on a connection of
//! one's own (`dlock bench`, PostgreSQL uncontended). Statements that need no
//! transaction go to the hot connection when it is free and to the pool when another
//! caller is using it, so concurrency is still the pool's.

use sqlx::query::Query;
use sqlx::{Database, Executor, IntoArguments, Pool, pool::PoolConnection};
use tokio::sync::{Mutex, MutexGuard};

/// The pool, with one of its connections held out for whoever comes when it is free.
pub(crate) struct Hot<DB: Database> {
    pool: Pool<DB>,
    slot: Mutex<Option<PoolConnection<DB>>>,
}

impl<DB> Hot<DB>
where
    DB: Database,
    <DB as Database>::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    pub(crate) fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            slot: Mutex::new(None),
        }
    }

    /// The hot connection if nobody is using it (taken from the pool the first time).
    async fn free(
        &self,
    ) -> Result<Option<MutexGuard<'_, Option<PoolConnection<DB>>>>, sqlx::Error> {
        let Ok(mut slot) = self.slot.try_lock() else {
            return Ok(None);
        };
        if slot.is_none() {
            *slot = Some(self.pool.acquire().await?);
        }
        Ok(Some(slot))
    }

    /// As `Query::fetch_optional`.
    ///
    /// # Cancel safety
    /// As the statement's own: dropped after it was sent, it may or may not have run.
    /// The connection stays usable (sqlx reads what it still owes before the next
    /// statement).
    pub(crate) async fn fetch_optional<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Option<DB::Row>, sqlx::Error> {
        if let Some(mut slot) = self.free().await?
            && let Some(conn) = slot.as_mut()
        {
            let r = q.fetch_optional(&mut **conn).await;
            drop_if_broken(&mut slot, r.as_ref().err());
            return r;
        }
        q.fetch_optional(&self.pool).await
    }

    /// As `Query::fetch_all`.
    ///
    /// # Cancel safety
    /// As [`Hot::fetch_optional`].
    pub(crate) async fn fetch_all<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<Vec<DB::Row>, sqlx::Error> {
        if let Some(mut slot) = self.free().await?
            && let Some(conn) = slot.as_mut()
        {
            let r = q.fetch_all(&mut **conn).await;
            drop_if_broken(&mut slot, r.as_ref().err());
            return r;
        }
        q.fetch_all(&self.pool).await
    }

    /// As `Query::execute`.
    ///
    /// # Cancel safety
    /// As [`Hot::fetch_optional`].
    pub(crate) async fn execute<'q>(
        &self,
        q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Result<DB::QueryResult, sqlx::Error> {
        if let Some(mut slot) = self.free().await?
            && let Some(conn) = slot.as_mut()
        {
            let r = q.execute(&mut **conn).await;
            drop_if_broken(&mut slot, r.as_ref().err());
            return r;
        }
        q.execute(&self.pool).await
    }
}

/// Closes the hot connection after an error that may have left it unusable (the next
/// caller takes a fresh one from the pool); a statement's own error leaves it be. A
/// server that ends the session says so first (SQLSTATE class 57P, operator
/// intervention, or 08, connection exception): the connection is dropped at that
/// message rather than at the closed socket the call after it would meet.
fn drop_if_broken<DB: Database>(slot: &mut Option<PoolConnection<DB>>, err: Option<&sqlx::Error>) {
    let broken = match err {
        Some(sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_)) => true,
        Some(sqlx::Error::Database(e)) => e
            .code()
            .is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    };
    if broken && let Some(mut conn) = slot.take() {
        conn.close_on_drop();
    }
}
