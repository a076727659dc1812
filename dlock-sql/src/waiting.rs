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
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dlock_core::backend::Claim;
use dlock_core::{FencingToken, LockError, LockName, OwnerId};
use tokio::time::Instant;

use crate::SqlLock;
use crate::queue::{QueueRequest, Queued};
use crate::store::Taken;

/// The waiting acquisitions of one `SqlLock`, by owner id.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
    /// When its queue entry's deadline was last moved on (`None`: not queued yet).
    joined: Option<Instant>,
    /// Held by its queue transaction in flight, which runs to its end even when the
    /// acquisition is dropped: its leave waits for it, so a join that commits after
    /// the acquisition gave up is still undone.
    serial: Arc<tokio::sync::Mutex<()>>,
}

impl Waiting {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn joined(&self, owner: &str) -> Option<Instant> {
        self.entries().get(owner).and_then(|e| e.joined)
    }

    /// The serial of `owner`'s queue transactions (its entry made if new).
    fn serial(&self, owner: &str) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(&self.entries().entry(owner.to_owned()).or_default().serial)
    }

    /// Records an answer: still queued (deadline moved on now), or done.
    fn answered(&self, owner: &str, queued: bool) {
        let mut entries = self.entries();
        if !queued {
            entries.remove(owner);
        } else if let Some(e) = entries.get_mut(owner) {
            e.joined = Some(Instant::now());
        }
    }

    /// Forgets `owner`, returning its serial if it ever ran a queue transaction.
    fn forget(&self, owner: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        self.entries().remove(owner).map(|e| e.serial)
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
        // a waiter of a client that does not queue polls as any attempt does
        let joins = waits && self.fifo();
        // (a LISTEN connection is started only for a waiter that queues)
        let live = if joins {
            self.queue_live().await
        } else {
            (Duration::ZERO, (0, String::new()))
        };
        let joined = self.waiting.joined(owner.as_str());
        let heartbeat_due = joined.is_none_or(|at| at.elapsed() >= live.0 / 3);
        let granted = self.store.take_granted(owner.as_str());
        if !(joins && joined.is_some() && heartbeat_due && !granted) {
            match self.take_statement(name, owner, ttl).await? {
                taken @ Claim::Taken(_) => {
                    self.waiting.answered(owner.as_str(), false);
                    return Ok(taken);
                }
                // a free lock refused for the queue (a crashed holder's lease ran
                // out, or only dead waiters queue): the queue's transaction grants
                // it to the live head, or takes it when there is none
                Claim::Held(Some(left)) if left.is_zero() => {}
                held if !joins || !heartbeat_due => return Ok(held),
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
            joins,
        };
        let this = self.clone();
        let work = async move { this.op("acquire", || this.store.wait_take(&req)).await };
        let queued = self.queue_op(owner, joins, work).await?;
        Ok(match queued {
            Queued::Taken(token) => {
                self.waiting.answered(owner.as_str(), false);
                Claim::Taken(FencingToken::from_signed(token, "token in the lock table")?)
            }
            Queued::Waiting(remaining) => {
                self.waiting.answered(owner.as_str(), joins);
                Claim::Held(remaining)
            }
        })
    }

    /// Runs `owner`'s queue transaction `work`: for a waiter, on a task of its own
    /// under its serial, so that a leave after it never runs before it.
    pub(crate) async fn queue_op<T: Send + 'static>(
        &self,
        owner: &OwnerId,
        waits: bool,
        work: impl Future<Output = Result<T, LockError>> + Send + 'static,
    ) -> Result<T, LockError> {
        if !waits {
            return work.await;
        }
        let serial = self.waiting.serial(owner.as_str()).lock_owned().await;
        let task = tokio::spawn(async move {
            let _serial = serial;
            work.await
        });
        task.await
            .map_err(|e| LockError::backend("the queue transaction's task failed", e.to_string()))?
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
    /// background (a drop cannot wait) and after its queue transaction in flight,
    /// giving back a grant it never took.
    pub(crate) fn leave_queue(&self, name: &LockName, owner: &OwnerId) {
        let _ = self.store.take_granted(owner.as_str());
        let Some(serial) = self.waiting.forget(owner.as_str()) else {
            return; // never queued
        };
        let (this, name, owner) = (
            self.clone(),
            name.as_str().to_owned(),
            owner.as_str().to_owned(),
        );
        // a clean-up: a program about to exit lets it end (`dlock_core::settle`);
        // outside a runtime nothing runs, and the entry's deadline drops it
        dlock_core::spawn_cleanup(async move {
            let _serial = serial.lock_owned().await;
            let leave = || this.store.grant_next(&name, Some(&owner));
            if let Err(e) = this.op("leave the queue", leave).await {
                tracing::debug!(error = %e, "leaving the queue failed; its deadline drops it");
            }
        });
    }

    /// Forgets `owner`'s waiting state, returning the serial its leave must take.
    pub(crate) fn forget_waiter(&self, owner: &OwnerId) -> Option<Arc<tokio::sync::Mutex<()>>> {
        let _ = self.store.take_granted(owner.as_str());
        self.waiting.forget(owner.as_str())
    }

    /// After a release that found waiters: grants the lock to the head.
    pub(crate) async fn grant_next(&self, name: &LockName) -> Result<(), LockError> {
        self.op("grant", || self.store.grant_next(name.as_str(), None))
            .await
    }
}
