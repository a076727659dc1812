//! Semaphores and read-write locks in SQL: two tables beside the lock table, one
//! transaction per acquisition, one statement per renewal and release.
//!
//! - `<table>_shared`: one row per semaphore or read-write lock (`name` is
//!   `sem:<name>` or `rw:<name>`), never deleted: the fencing counter `token`, the
//!   permit count its holders use, and `intent_until`, until when a waiting writer keeps
//!   new readers out. Locking this row serialises every acquisition of the name.
//! - `<table>_holders`: one row per holder (`name`, `owner`, `access`, `token`,
//!   `expires_at`), deleted on release or when found expired.
//!
//! Times are milliseconds of the database clock, like the lock table's expiry.

mod decide;
#[macro_use]
mod flow;
#[macro_use]
mod grants;
mod lock;
mod statements;

pub(crate) use decide::{Decision, Head, HolderRow, decide, tag};
pub(crate) use grants::access_of;
pub(crate) use statements::{Dialect, SharedSql};

use std::time::Duration;

use dlock_core::{Access, LockName};

/// One acquisition attempt of a semaphore's permit, a read or the write lease.
#[derive(Clone, Debug)]
pub(crate) struct SharedRequest {
    /// `sem:<name>` or `rw:<name>`.
    pub key: String,
    pub access: Access,
    pub owner: String,
    pub ttl: Duration,
    /// The caller waits if this fails and queues: it joins the queue (`crate::queue`).
    pub waits: bool,
    /// The caller waits if this fails but does not queue: a writer then leaves an
    /// intent that keeps new readers out for this long.
    pub intent: Option<Duration>,
    /// How long its queue entry lives without another attempt.
    pub live: Duration,
    /// Its LISTEN connection's mark (`crate::listen`) and grant channel (PostgreSQL), or `(0, "")`.
    pub listener: (i64, String),
}

impl SharedRequest {
    /// Its queue entry.
    pub(crate) fn queued(&self) -> crate::queue::QueueRequest {
        crate::queue::QueueRequest {
            name: self.key.clone(),
            access: tag(self.access),
            permits: match self.access {
                Access::Permit(n) => i64::from(n),
                _ => 0,
            },
            owner: self.owner.clone(),
            ttl: self.ttl,
            live: self.live,
            listener: self.listener.clone(),
            joins: self.waits,
        }
    }
}

/// The row key of `name`'s semaphore or read-write lock.
pub(crate) fn shared_key(name: &LockName, access: Access) -> String {
    shared_key_prefix(name.as_str(), access)
}

/// The start of the row keys of semaphores (or read-write locks) whose names start
/// with `prefix`.
pub(crate) fn shared_key_prefix(prefix: &str, access: Access) -> String {
    let space = if access.is_rw() { "rw" } else { "sem" };
    format!("{space}:{prefix}")
}

/// What a shared acquisition found.
pub(crate) enum SharedTaken {
    /// Taken (or already ours), with this token.
    Yes(i64),
    /// Not now; the earliest holder or intent lapses in this long.
    No(Option<Duration>),
    /// A semaphore whose holders use this many permits.
    Mismatch(i64),
}

/// A current holder of a semaphore or read-write lock.
pub(crate) struct SharedHolder {
    pub owner: String,
    pub access: String,
    pub token: i64,
    pub remaining_ms: i64,
    /// The permit count the semaphore's holders use.
    pub permits: i64,
}

/// A transaction the database gave up as a deadlock victim or a serialization failure
/// (SQLSTATE class 40): it changed nothing and can run again.
pub(crate) fn is_retryable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => d.code().is_some_and(|c| c.starts_with("40")),
        _ => false,
    }
}

/// Runs `attempt` — one transaction — again while the database gave it up as a
/// deadlock victim or serialization failure (at most four times more).
pub(crate) async fn retry_victims<T, F, Fut>(mut attempt: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut retries = 0;
    loop {
        match attempt().await {
            Err(e) if retries < 4 && is_retryable(&e) => retries += 1,
            other => return other,
        }
    }
}
