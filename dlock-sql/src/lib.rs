//! # dlock-sql
//!
//! A [`DistributedLock`](dlock_core::DistributedLock) on a SQL database: PostgreSQL, MySQL/MariaDB or SQLite, each
//! behind its own cargo feature (all on by default).
//!
//! One row per lock name holds the owner, the fencing token and the expiry. Every
//! operation is **one statement** that decides by the **database's clock**, never the
//! client's:
//! - acquire: an upsert that takes the row when it is free or expired, its token
//!   becoming `max(token + 1, database clock in µs)` (PostgreSQL and SQLite
//!   `ON CONFLICT … DO UPDATE … WHERE … RETURNING`; MySQL `ON DUPLICATE KEY UPDATE`
//!   with `LAST_INSERT_ID(expr)`);
//! - renew and release: owner- and token-checked `UPDATE`s. Release expires the row
//!   instead of deleting it, so the token never goes back. A new row's first token is
//!   the database clock in microseconds, so [`SqlLock::prune`] can delete the rows of
//!   long-idle names and a name created again still starts above its old tokens; and
//!   since every grant takes at least the clock, a failover to a standby that missed
//!   the last grants cannot repeat a token either (while the clock does not step back).
//!
//! Waiters on PostgreSQL are woken by `LISTEN`/`NOTIFY` (the release statement
//! notifies); on MySQL and SQLite they poll with jittered backoff capped by the
//! holder's remaining time. No session state is relied on, so the lock works behind a
//! transaction-mode pooler such as PgBouncer: add `pooler=transaction` to the URL
//! ([`SqlLockBuilder::transaction_pooler`]), and each statement runs unprepared in a
//! transaction of its own while waiters poll (`LISTEN` needs a session).
//!
//! ```no_run
//! use std::time::Duration;
//! use dlock_core::{DistributedLock, LockName};
//! use dlock_sql::SqlLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = SqlLock::connect("sqlite:///var/lib/myapp/locks.db").await?;
//! let name = LockName::new("nightly-report")?;
//! if let Some(lease) = locks.try_acquire(&name, Duration::from_secs(60)).await? {
//!     println!("got it, token {}", lease.token());
//!     locks.release(&lease).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! The table (created on first connect unless [`SqlLockBuilder::create_table`] is
//! `false`); the DDL for teams that manage schemas themselves:
//!
//! ```sql
//! -- PostgreSQL
//! CREATE TABLE dlock_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
//!   token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
//! -- MySQL / MariaDB
//! CREATE TABLE dlock_locks (name VARBINARY(256) NOT NULL PRIMARY KEY,
//!   owner VARCHAR(255) CHARACTER SET ascii NOT NULL, token BIGINT NOT NULL,
//!   expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB;
//! -- SQLite
//! CREATE TABLE dlock_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
//!   token INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT;  -- unix ms
//! ```
//!
//! URL query parameters read by dlock (the rest go to sqlx): `table`, `pool_size`,
//! `op_timeout` (e.g. `2s`), `poll_max` (e.g. `100ms`), `listen` (`true`/`false`).

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
compile_error!("dlock-sql needs at least one of the features postgres, mysql, sqlite");

mod connect;
mod doctor;
mod errors;
pub mod fence;
mod hot;
#[macro_use]
mod values;
#[macro_use]
pub mod results;
#[macro_use]
mod shared;
#[cfg(feature = "mysql")]
mod mysql;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
pub mod prune;
#[cfg(test)]
mod renew_batch_tests;
#[cfg(test)]
mod retake_tests;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{
    Backend, Batcher, Claim, ClaimDriver, Claims, Subscription, WaitPolicy, break_claimed,
    resume_held,
};
use dlock_core::{
    Access, Capabilities, FencingToken, Held, HolderValue, Holding, Lease, LockError, LockInfo,
    LockName, OwnerId, Ticket,
};
use tokio::time::Instant;

pub use connect::SqlLockBuilder;
pub use fence::SqlFence;
pub use options::{DEFAULT_TABLE, validate_table_name};
pub use prune::Pruned;
pub use results::SqlResults;

use options::Options;
use store::{Renewal, Store, Taken};

/// A distributed lock on PostgreSQL, MySQL/MariaDB or SQLite. Cheap to clone (clones
/// share the connection pool).
#[derive(Clone)]
pub struct SqlLock {
    store: Arc<dyn Store>,
    opts: Arc<Options>,
    /// Renewals of held locks due together, sent as one statement per batch.
    renewals: Arc<Batcher<Renewal, bool>>,
}

/// The most renewals sent in one statement: SQLite binds four parameters a lock (far
/// below its limit of 32 766), MySQL's batch is a `UNION` of this many rows.
const RENEW_BATCH: usize = 1000;

/// The batcher of `store`'s renewals: each batch one statement (MySQL: an update and
/// a read-back), made again within `timeout` on a connection found broken, as
/// [`SqlLock::op`] does.
fn renewal_batcher(store: Arc<dyn Store>, timeout: Duration) -> Batcher<Renewal, bool> {
    Batcher::start("renew", RENEW_BATCH, move |batch: Vec<Renewal>| {
        let store = Arc::clone(&store);
        async move {
            let what = format!("renew on {}", store.kind());
            let renew = || store.renew_batch(&batch);
            let answered =
                dlock_core::backend::retry_within(timeout, &what, renew, errors::is_broken, |e| {
                    errors::from_sqlx(&what, e)
                })
                .await?;
            Ok(answered.value.into_iter().map(Ok).collect())
        }
    })
}

impl std::fmt::Debug for SqlLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlLock")
            .field("database", &self.store.kind())
            .field("table", &self.opts.table)
            .finish_non_exhaustive()
    }
}

impl SqlLock {
    /// Connects with default options: `postgres://…`, `mysql://…` (or `mariadb://…`),
    /// `sqlite://path` (created if missing; WAL mode). Creates the table if missing.
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL or a database whose feature is off;
    /// [`LockError::Unavailable`] when the database cannot be reached.
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        SqlLockBuilder::new(url).connect().await
    }

    /// A builder for table name, pool size and timeouts.
    #[must_use]
    pub fn builder(url: &str) -> SqlLockBuilder {
        SqlLockBuilder::new(url)
    }

    /// Which database this is: `"postgres"`, `"mysql"` or `"sqlite"`.
    #[must_use]
    pub fn database(&self) -> &'static str {
        self.store.kind()
    }

    /// How a busy lock is waited for.
    fn wait_policy_now(&self) -> WaitPolicy {
        WaitPolicy {
            poll_min: self.opts.poll_min,
            poll_max: self.opts.poll_max,
            notify_fallback: self.opts.notify_fallback,
        }
    }

    /// Runs one statement under the operation timeout.
    /// Runs the statement `f` makes within the operation timeout. On a connection
    /// found broken — a server or pooler restarted, every idle connection in the pool
    /// died with it, and a pooler may refuse logins for a moment after — the
    /// statement is made again, after a short pause that doubles up to 200 ms, until
    /// it gets an answer or the timeout ends (then `Unavailable` with the last
    /// error). Each operation is safe to repeat: an acquisition by the same owner
    /// takes its own grant back with the same token, a renewal or release compares
    /// owner and token. A release whose first attempt went through before its
    /// connection broke answers `false`.
    async fn op<T, F, Fut>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn() -> Fut + Send,
        Fut: Future<Output = Result<T, sqlx::Error>> + Send,
    {
        let what = format!("{what} on {}", self.store.kind());
        dlock_core::backend::retry_within(self.opts.op_timeout, &what, f, errors::is_broken, |e| {
            errors::from_sqlx(&what, e)
        })
        .await
        .map(|answered| answered.value)
    }
}

/// One statement each way (the uncontended path in the fewest round trips):
/// acquire is an upsert that takes the row when free or expired by the database clock,
/// release an owner- and token-checked `UPDATE` (PostgreSQL: with a `NOTIFY`).
#[async_trait]
impl ClaimDriver for SqlLock {
    async fn claim(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
        ttl: Duration,
        waits: bool,
    ) -> Result<Claim, LockError> {
        if access != Access::Exclusive {
            return self.claim_shared(name, access, owner, ttl, waits).await;
        }
        let taken = self
            .op("acquire", || {
                self.store.try_take(name.as_str(), owner.as_str(), ttl)
            })
            .await?;
        Ok(match taken {
            Taken::Yes(token) => {
                Claim::Taken(FencingToken::from_signed(token, "token in the lock table")?)
            }
            Taken::No(remaining) => Claim::Held(remaining),
        })
    }

    async fn subscribe(
        &self,
        name: &LockName,
        access: Access,
        _owner: &OwnerId,
    ) -> Option<Subscription> {
        if !self.opts.listen {
            return None;
        }
        let key = match access {
            Access::Exclusive => name.as_str().to_owned(),
            _ => shared::shared_key(name, access),
        };
        self.store.subscribe(&key).await
    }

    fn wait_policy(&self) -> WaitPolicy {
        self.wait_policy_now()
    }
}

#[async_trait]
impl Backend for SqlLock {
    type Family = Claims;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        if lease.access() != Access::Exclusive {
            return self.renew_shared(lease).await;
        }
        let sent = Instant::now();
        let token =
            i64::try_from(lease.token().get()).map_err(|_| LockError::lease_lost(lease.name()))?;
        let renewal = Renewal {
            name: lease.name().as_str().to_owned(),
            owner: lease.owner().as_str().to_owned(),
            token,
            ttl: lease.ttl(),
        };
        // with the other renewals due now: one statement for them all
        if self.renewals.submit(renewal)?.answer().await? {
            Ok(lease.renewed(lease.ttl(), sent))
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        if lease.access() != Access::Exclusive {
            return self.release_shared(lease).await;
        }
        let Ok(token) = i64::try_from(lease.token().get()) else {
            return Ok(false);
        };
        self.op("release", || {
            self.store
                .release(lease.name().as_str(), lease.owner().as_str(), token)
        })
        .await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let holder = self
            .op("inspect", || self.store.holder(name.as_str()))
            .await?;
        holder
            .map(|h| {
                Ok(LockInfo {
                    owner: OwnerId::from_stored(&h.owner),
                    token: FencingToken::from_signed(h.token, "token in the lock table")?,
                    remaining: h.remaining,
                    proclaimed: h.proclaimed.and_then(|v| HolderValue::new(&v).ok()),
                })
            })
            .transpose()
    }

    async fn proclaim(&self, lease: &Lease, value: &HolderValue) -> Result<(), LockError> {
        dlock_core::backend::proclaimable(self.backend_name(), lease)?;
        let lost = || LockError::lease_lost(lease.name());
        let token = i64::try_from(lease.token().get()).map_err(|_| lost())?;
        let (name, owner) = (lease.name().as_str(), lease.owner().as_str());
        let written = self
            .op("proclaim", || {
                self.store.proclaim(name, owner, token, value.as_str())
            })
            .await?;
        if written {
            return Ok(());
        }
        // nothing changed: not the holder — or (MySQL) the row had this value already
        match Backend::inspect(self, lease.name()).await? {
            Some(h)
                if h.owner == *lease.owner()
                    && h.token == lease.token()
                    && h.proclaimed.as_ref() == Some(value) =>
            {
                Ok(())
            }
            _ => Err(lost()),
        }
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.shared_holders(name, of).await
    }

    fn capabilities(&self) -> Capabilities {
        // Not fair: whoever's statement lands first after a release wins.
        let notify = self.store.kind() == "postgres" && self.opts.listen;
        Capabilities::per_lease()
            .with_notify(notify)
            .with_shared(true)
            .with_batched_renewals(true)
    }

    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        resume_held(self, ticket).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        break_claimed(self, name).await
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        self.op("diagnose", || self.store.diagnose()).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let rows = self.op("list", || self.store.held(prefix)).await?;
        let mut held = Vec::with_capacity(rows.len());
        for (name, h) in rows {
            // a row written by another program under a name dlock would refuse is
            // none of ours
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            let holder = LockInfo {
                owner: OwnerId::from_stored(&h.owner),
                token: FencingToken::from_signed(h.token, "token in the lock table")?,
                remaining: h.remaining,
                proclaimed: h.proclaimed.and_then(|v| HolderValue::new(&v).ok()),
            };
            // waiters poll; they leave no trace in the table
            held.push(Held::new(name, holder, None));
        }
        Ok(held)
    }

    fn backend_name(&self) -> &'static str {
        self.store.kind()
    }
}
