//! An exclusive acquisition that waits: queued on the database (`crate::queue`),
//! granted by a release, and leaving the queue when the wait ends without the lock.
//!
//! Each attempt of a waiter is the lock table's one statement — it finds a grant
//! made to the waiter (the row is its own) or a free lock nobody queues for — except
//! when its entry needs its deadline moved on (its first attempt, then every third of
//! its liveness window) or the statement found the lock free but refused it for the
//! queue: that attempt is the queue's transaction, which also joins, grants a free
//! lock to a live head, or takes it when the waiter is first. A waiter that heard its
//! grant (PostgreSQL) sends the statement at once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dlock_core::backend::Claim;
use dlock_core::{FencingToken, LockError, LockName, OwnerId};
use tokio::time::Instant;

use crate::SqlLock;
use crate::queue::{QueueRequest, Queued};
use crate::store::Taken;

/// The waiting acquisitions of one `SqlLock`, by owner id: when each last moved its
/// queue entry's deadline on.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    entries: Mutex<HashMap<String, Instant>>,
}

impl Waiting {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SqlLock {
    /// One attempt at the exclusive lock (see `ClaimDriver::claim`).
    pub(crate) async fn claim_exclusive(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
        waits: bool,
    ) -> Result<Claim, LockError> {
        let live = self.queue_live().await;
        let joined = self.waiting.entries().get(owner.as_str()).copied();
        let heartbeat_due = joined.is_none_or(|at| at.elapsed() >= live.0 / 3);
        let granted = self.store.take_granted(owner.as_str());
        if !(waits && joined.is_some() && heartbeat_due && !granted) {
            match self.take_statement(name, owner, ttl).await? {
                taken @ Claim::Taken(_) => {
                    self.waiting.entries().remove(owner.as_str());
                    return Ok(taken);
                }
                // a free lock refused for the queue (a crashed holder's lease ran
                // out): the queue's transaction grants it to the head now
                Claim::Held(Some(left)) if waits && left.is_zero() => {}
                held if !waits || !heartbeat_due => return Ok(held),
                _ => {}
            }
        }
        let req = QueueRequest {
            name: name.as_str().to_owned(),
            access: "x",
            permits: 0,
            owner: owner.as_str().to_owned(),
            ttl,
            live: live.0,
            listener: live.1,
        };
        let queued = self.op("acquire", || self.store.wait_take(&req)).await?;
        let mut entries = self.waiting.entries();
        Ok(match queued {
            Queued::Taken(token) => {
                entries.remove(owner.as_str());
                Claim::Taken(FencingToken::from_signed(token, "token in the lock table")?)
            }
            Queued::Waiting(remaining) => {
                entries.insert(owner.as_str().to_owned(), Instant::now());
                Claim::Held(remaining)
            }
        })
    }

    /// The lock table's acquire statement.
    async fn take_statement(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Claim, LockError> {
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

    /// How long a waiter's entry lives without another queued attempt, and how it
    /// hears of its grant: one that listens (PostgreSQL) three of the longest gaps
    /// between its attempts; one that polls ten of its polling gaps at the slowest.
    pub(crate) async fn queue_live(&self) -> (Duration, (i64, String)) {
        match self.store.grant_listener().await {
            Some(listener) => (self.wait_policy_now().writer_intent(), listener),
            None => (self.opts.poll_max * 10, (0, String::new())),
        }
    }

    /// `owner` stopped waiting for `name` without the lock: leaves the queue, in the
    /// background (a drop cannot wait), giving back a grant it never took.
    pub(crate) fn leave_queue(&self, name: &LockName, owner: &OwnerId) {
        let _ = self.store.take_granted(owner.as_str());
        if self.waiting.entries().remove(owner.as_str()).is_none() {
            return; // never queued
        }
        let (this, name, owner) = (
            self.clone(),
            name.as_str().to_owned(),
            owner.as_str().to_owned(),
        );
        // a clean-up: a program about to exit lets it end (`dlock_core::settle`);
        // outside a runtime nothing runs, and the entry's deadline drops it
        dlock_core::spawn_cleanup(async move {
            let leave = || this.store.grant_next(&name, Some(&owner));
            if let Err(e) = this.op("leave the queue", leave).await {
                tracing::debug!(error = %e, "leaving the queue failed; its deadline drops it");
            }
        });
    }

    /// After a release that found waiters: grants the lock to the head.
    pub(crate) async fn grant_next(&self, name: &LockName) -> Result<(), LockError> {
        self.op("grant", || self.store.grant_next(name.as_str(), None))
            .await
    }
}
