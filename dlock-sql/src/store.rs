//! What each SQL dialect implements: the four statements and the table.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::Subscription;

use crate::queue::{QueueRequest, Queued};
use crate::shared::{SharedHolder, SharedRequest, SharedTaken};

/// The outcome of one acquire statement.
pub(crate) enum Taken {
    /// The row was free or expired and is now ours, with this token.
    Yes(i64),
    /// Someone holds it (or it is free but a queue waits for it).
    No {
        /// The holder's remaining time, if the database told it.
        remaining: Option<Duration>,
        /// The row's token then, if read (a later grant's is above it: see
        /// `dlock_core::backend::grants`).
        counter: Option<u64>,
    },
}

/// What a release statement did.
pub(crate) enum Released {
    /// The row was the caller's and is free now; `queued`: someone waits for it (the
    /// release then grants it to the head, `QueueStore::grant_next`).
    Yes { queued: bool },
    /// The row was not the caller's (released already, expired, taken by another).
    No,
}

/// One held lock's renewal, sent with the others due at the same time (see
/// [`Store::renew_batch`]).
pub(crate) struct Renewal {
    pub name: String,
    pub owner: String,
    pub token: i64,
    pub ttl: Duration,
}

/// Which renewals of `batch` the database extended, from the `(name, owner)` pairs it
/// returned (an owner id is unique to one acquisition, so the pair names one lease).
pub(crate) fn renewed(batch: &[Renewal], returned: &[(String, String)]) -> Vec<bool> {
    let returned: std::collections::HashSet<(&str, &str)> = returned
        .iter()
        .map(|(n, o)| (n.as_str(), o.as_str()))
        .collect();
    batch
        .iter()
        .map(|r| returned.contains(&(r.name.as_str(), r.owner.as_str())))
        .collect()
}

/// The current holder as the database sees it.
pub(crate) struct Holder {
    pub owner: String,
    pub token: i64,
    pub remaining: Duration,
    /// The value it proclaimed, if any (`crate::values`).
    pub proclaimed: Option<String>,
}

impl Holder {
    /// The holder in `row`'s columns from `at` on: owner, token, the milliseconds its
    /// lease has left (NULL: none), the proclaimed value.
    pub(crate) fn at<'r, R: sqlx::Row>(row: &'r R, at: usize) -> Result<Self, sqlx::Error>
    where
        usize: sqlx::ColumnIndex<R>,
        String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
        let remaining: Option<i64> = row.try_get(at + 2)?;
        Ok(Self {
            owner: row.try_get(at)?,
            token: row.try_get(at + 1)?,
            remaining: dlock_core::backend::from_millis(remaining).unwrap_or_default(),
            proclaimed: row.try_get(at + 3)?,
        })
    }
}

/// Semaphores and read-write locks (see [`crate::shared`]), implemented for each
/// dialect by the `shared_store!` macro.
#[async_trait]
pub(crate) trait SharedStore: Send + Sync {
    /// One acquisition attempt, in one transaction.
    async fn take_shared(&self, req: &SharedRequest) -> Result<SharedTaken, sqlx::Error>;
    /// Extends an unexpired holder with this owner and token.
    async fn renew_shared(
        &self,
        key: &str,
        owner: &str,
        token: i64,
        ttl: Duration,
    ) -> Result<bool, sqlx::Error>;
    /// Removes an unexpired holder with this owner and token, and says whether anyone
    /// is queued (PostgreSQL: when nobody is, notifies observers).
    async fn release_shared(
        &self,
        key: &str,
        owner: &str,
        token: i64,
    ) -> Result<Released, sqlx::Error>;
    /// Grants `key` to the waiters first in line while they fit; with `giving_up`,
    /// that waiter leaves the line first and gives back a grant it never took.
    async fn grant_next_shared(
        &self,
        key: &str,
        giving_up: Option<&str>,
    ) -> Result<(), sqlx::Error>;
    /// The unexpired holders, oldest grant first.
    async fn holders_shared(&self, key: &str) -> Result<Vec<SharedHolder>, sqlx::Error>;
    /// The unexpired holders of every key starting with one of `starts`, each with its
    /// key, by key and then oldest grant first.
    async fn listed_shared(
        &self,
        starts: [&str; 2],
    ) -> Result<Vec<(String, SharedHolder)>, sqlx::Error>;
    /// Deletes one batch of rows idle for longer than `idle_ms` from the lock table,
    /// the shared table, the holders table and the queue (see [`crate::prune`]); how many of each.
    async fn prune_batch(&self, idle_ms: i64) -> Result<[u64; 4], sqlx::Error>;
}

/// The exclusive lock's queue (see [`crate::queue`]), implemented for each dialect by
/// the `queue_store!` macro.
#[async_trait]
pub(crate) trait QueueStore: Send + Sync {
    /// A waiter's attempt, in one transaction: takes a grant or a free lock it is first
    /// for, or joins the queue (moving its deadline on when it is in it already).
    async fn wait_take(&self, req: &QueueRequest) -> Result<Queued, sqlx::Error>;
    /// Grants `name`'s lock, if free, to the oldest live waiter; with `giving_up`,
    /// that waiter leaves the queue first and gives back a grant it never took.
    async fn grant_next(&self, name: &str, giving_up: Option<&str>) -> Result<(), sqlx::Error>;
    /// Adds the lock table's `queued_until` column if it was created before the queue
    /// (several processes at once: one adds it, the others find it there).
    async fn add_queue_column(&self) -> Result<(), sqlx::Error>;
}

/// One dialect's statements. Each is a single statement, so it is atomic on its own
/// and works through a transaction-mode connection pooler (run in a transaction of its
/// own there: see `crate::hot`).
#[async_trait]
pub(crate) trait Store: SharedStore + QueueStore + ResultRows + ValueRows {
    /// Creates the tables (the lock table and the shared ones) if they are missing;
    /// safe when several processes start at once.
    async fn migrate(&self) -> Result<(), sqlx::Error>;
    /// Takes the row if free or expired by the database clock; its token becomes
    /// `max(token + 1, clock in µs)`.
    async fn try_take(&self, name: &str, owner: &str, ttl: Duration) -> Result<Taken, sqlx::Error>;
    /// Extends every row of `batch` that is unexpired and still carries its owner and
    /// token, in one statement (MySQL: an update and a read-back); which were, in order.
    async fn renew_batch(&self, batch: &[Renewal]) -> Result<Vec<bool>, sqlx::Error>;
    /// Expires an unexpired row that still carries this owner and token, and says
    /// whether anyone is queued for it (PostgreSQL: when nobody is, notifies
    /// observers that it is free).
    async fn release(&self, name: &str, owner: &str, token: i64) -> Result<Released, sqlx::Error>;
    /// Puts `mark` (the revoked owner id) in place of the owner of an unexpired row
    /// that still carries this owner and token, its expiry kept; whether it did.
    async fn revoke(
        &self,
        name: &str,
        owner: &str,
        token: i64,
        mark: &str,
    ) -> Result<bool, sqlx::Error>;
    /// [`release`](Self::release) and, when someone is queued, the grant to the head,
    /// in one call — for a lock that was taken after queueing, so likely wanted again
    /// (PostgreSQL's queue functions); `None` where there is no such call.
    async fn release_granting(
        &self,
        _name: &str,
        _owner: &str,
        _token: i64,
    ) -> Result<Option<Released>, sqlx::Error> {
        Ok(None)
    }
    /// The unexpired holder, if any.
    async fn holder(&self, name: &str) -> Result<Option<Holder>, sqlx::Error>;
    /// What decides whether locking on this database is safe (see `doctor`).
    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, sqlx::Error>;
    /// Every unexpired holder whose name starts with `prefix`, by name.
    async fn held(&self, prefix: &str) -> Result<Vec<(String, Holder)>, sqlx::Error>;
    /// A wake-up for releases of `name` — or, for `crate::queue::grant_key(owner)`,
    /// for grants to that waiter — where the database can push one.
    async fn subscribe(&self, _name: &str) -> Option<Subscription> {
        None
    }
    /// The mark and channel a waiter's grant is sent to (PostgreSQL's LISTEN
    /// connection); `None` where waiters poll.
    async fn grant_listener(&self) -> Option<(i64, String)> {
        None
    }
    /// The grant messages its releases send queued waiters, by owner id, where the
    /// database can push them (PostgreSQL's LISTEN connection).
    fn grants(&self) -> Option<&dlock_core::backend::grants::GrantSlots> {
        None
    }
    /// Raises `resource`'s fence to `token` in a transaction of its own; the mark
    /// after it (above `token`: stale).
    async fn fence(&self, resource: &str, token: i64) -> Result<i64, sqlx::Error>;
    /// `"postgres"`, `"mysql"` or `"sqlite"`.
    fn kind(&self) -> &'static str;
    /// What a person needs to know to fix `e`, where the store can say more than the
    /// database did (SQLite: whose file it cannot write).
    fn explain(&self, _e: &sqlx::Error) -> Option<String> {
        None
    }
}

/// Idempotency records (see [`crate::results`]), implemented for each dialect by the
/// `result_rows!` macro.
#[async_trait]
pub(crate) trait ResultRows: Send + Sync {
    /// Marks a request as begun under `token` (see `dlock_sql::results`); the
    /// request's token after it (above `token`: stale).
    async fn begin_request(
        &self,
        request: &str,
        token: i64,
        retain_ms: i64,
    ) -> Result<i64, sqlx::Error>;
    /// Records a request's result if no higher token holds it; whether it did, and the
    /// token seen when it did not.
    async fn record_result(
        &self,
        request: &str,
        token: i64,
        result: &[u8],
        retain_ms: i64,
    ) -> Result<(bool, Option<i64>), sqlx::Error>;
    /// A request's retained result.
    async fn request_result(&self, request: &str) -> Result<Option<Vec<u8>>, sqlx::Error>;
}

/// Proclaimed values (`crate::values`), implemented for each dialect by the
/// `value_rows!` macro.
#[async_trait]
pub(crate) trait ValueRows: Send + Sync {
    /// Stores `value` for the holder `owner` with `token` of `name`, if it still holds
    /// it: whether a row changed.
    async fn proclaim(
        &self,
        name: &str,
        owner: &str,
        token: i64,
        value: &str,
    ) -> Result<bool, sqlx::Error>;
}
