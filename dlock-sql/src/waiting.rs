//! An exclusive acquisition that waits: queued on the database (`crate::queue`),
//! granted by a release, and leaving the queue when the wait ends without the lock.
//!
//! Each attempt of a waiter is the lock table's one statement — it finds a grant
//! made to the waiter (the row is its own) or a free lock nobody queues for — except
//! when its entry needs its deadline moved on (its first attempt, then every third of
//! its liveness window) or the statement found the lock free but refused it for the
//! queue: that attempt is the queue's transaction, which also joins, grants a free
//! lock to a live head, or takes it when the waiter is first. A waiter whose client
//! last held the name after queueing for it (a hot lock, wanted back: its release
//! granted it on) sends the queue's transaction as its first attempt, without the
//! statement that would only find the lock held. A waiter told of its
//! grant (PostgreSQL) takes the lock from the message when its last "queued" answer is
//! recent and the grant's token is above that answer's (`dlock_core::backend::grants`:
//! the lease counts from that attempt), and otherwise sends the statement at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::Claim;
use dlock_core::backend::grants::{Answer, fresh_for};
use dlock_core::{FencingToken, LockError, LockName, OwnerId};
use tokio::time::Instant;

use crate::SqlLock;
use crate::queue::{QueueRequest, Queued};
use crate::store::Taken;

/// A token from the lock table.
fn token_of(token: i64) -> Result<FencingToken, LockError> {
    FencingToken::from_signed(token, "token in the lock table")
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
        let joins = waits && self.joins_queue(owner);
        // (a LISTEN connection is started only for a waiter that queues)
        let live = if joins {
            self.queue_live().await
        } else {
            (Duration::ZERO, (0, String::new()))
        };
        // a waiter told of its grant (PostgreSQL) takes it from the message when that
        // is safe, without another statement
        let grants = self.store.grants().filter(|_| joins && live.1.0 != 0);
        if let Some(grants) = grants {
            if let Some(granted) = grants.take(owner.as_str(), fresh_for(ttl)) {
                self.done_waiting(owner);
                return Ok(granted);
            }
            grants.open(owner.as_str());
        }
        let joined = self.waiting.joined(owner.as_str());
        let heartbeat_due = self
            .waiting
            .joined_as(owner.as_str(), &live.1)
            .is_none_or(|at| at.elapsed() >= live.0 / 3);
        // queued, listening, nothing lost and the holder's lease not yet out: its grant
        // will come as a message, and a statement would only contend for the row
        if joined.is_some()
            && !heartbeat_due
            && grants.is_some_and(|g| g.quiet(owner.as_str()))
            && let Some(left) = self.waiting.holder_left(owner.as_str())
        {
            return Ok(Claim::Held(Some(left)));
        }
        // a grant message it may not take alone: the statement confirms it
        let granted = grants.is_some_and(|g| g.pending(owner.as_str()));
        // a first attempt where this client's last hold of the name was queued for:
        // straight to the queue (the lock was granted on when it was released)
        let queue_first = joins && joined.is_none() && self.waiting.was_contended(name.as_str());
        // the statement goes first unless the queue's transaction is due anyway (a
        // queued waiter's heartbeat, no grant to confirm) or the name is hot
        let queue_due = joins && joined.is_some() && heartbeat_due && !granted;
        if !(queue_due || queue_first) {
            let sent = Instant::now();
            match self.take_statement(name, owner, ttl).await? {
                Taken::Yes(token) => {
                    self.done_waiting(owner);
                    return Ok(Claim::Taken(token_of(token)?));
                }
                // a free lock refused for the queue (a crashed holder's lease ran
                // out, or only dead waiters queue): the queue's transaction grants
                // it to the live head, or takes it when there is none
                Taken::No {
                    remaining: Some(left),
                    ..
                } if left.is_zero() => {}
                Taken::No { remaining, counter } if !joins || !heartbeat_due => {
                    self.heard_queued(owner, sent, remaining, counter);
                    return Ok(Claim::Held(remaining));
                }
                Taken::No { .. } => {}
            }
        }
        let req = QueueRequest {
            name: name.as_str().to_owned(),
            access: "x",
            permits: 0,
            owner: owner.as_str().to_owned(),
            ttl,
            live: live.0,
            listener: live.1.clone(),
            joins,
        };
        let this = self.clone();
        let work = async move { this.op("acquire", || this.store.wait_take(&req)).await };
        let sent = Instant::now();
        let queued = self.queue_op(owner, joins, work).await?;
        Ok(match queued {
            Queued::Taken(token) => {
                self.done_waiting(owner);
                Claim::Taken(token_of(token)?)
            }
            Queued::Waiting { remaining, counter } => {
                self.waiting
                    .answered(owner.as_str(), joins.then_some(&live.1));
                self.heard_queued(owner, sent, remaining, counter);
                Claim::Held(remaining)
            }
        })
    }

    /// Whether a waiter's attempt (exclusive or shared) joins the queue: always where
    /// waiters queue (`fifo`, by default PostgreSQL with LISTEN); never with
    /// `fifo=false`; and by default where waiters poll (MySQL, SQLite, a transaction
    /// pooler) once the waiter has polled for ten polling gaps (1 s by default). A client that releases and asks again at
    /// once wins every race against a poller — the lock is free for microseconds a
    /// cycle — so an unbounded barging wait could last forever; past the bound the
    /// waiter is in the queue, which no attempt passes, and the next release grants it
    /// the lock (Go's `sync.Mutex` starvation mode, on the database).
    pub(crate) fn joins_queue(&self, owner: &OwnerId) -> bool {
        match self.opts.fifo {
            Some(fifo) => fifo,
            None if self.fifo() => true,
            None => self
                .waiting
                .polled_for(owner.as_str(), self.opts.poll_max * 10),
        }
    }

    /// `owner` holds the lock: it waits no more.
    fn done_waiting(&self, owner: &OwnerId) {
        if self.waiting.joined(owner.as_str()).is_some() {
            self.waiting.holds_after_queueing(owner.as_str());
        }
        self.waiting.answered(owner.as_str(), None);
        self.waiting.stopped_polling(owner.as_str());
        if let Some(grants) = self.store.grants() {
            grants.close(owner.as_str());
        }
    }

    /// An attempt sent at `sent` was answered "queued" while the row's token was
    /// `counter`: a grant message with a token above it may be taken from then on; the
    /// holder's lease ends `remaining` after `sent` at the latest, unless renewed.
    fn heard_queued(
        &self,
        owner: &OwnerId,
        sent: Instant,
        remaining: Option<Duration>,
        counter: Option<u64>,
    ) {
        self.waiting.holder_seen(owner.as_str(), sent, remaining);
        if let (Some(grants), Some(counter)) = (self.store.grants(), counter) {
            grants.answered(owner.as_str(), sent, &Answer::held(remaining, counter));
        }
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
    ) -> Result<Taken, LockError> {
        self.op("acquire", || {
            self.store.try_take(name.as_str(), owner.as_str(), ttl)
        })
        .await
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
        let Some(serial) = self.forget_waiter(owner) else {
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
        if let Some(grants) = self.store.grants() {
            grants.close(owner.as_str());
        }
        self.waiting.forget(owner.as_str())
    }

    /// After a release that found waiters: grants the lock to the head.
    pub(crate) async fn grant_next(&self, name: &LockName) -> Result<(), LockError> {
        self.op("grant", || self.store.grant_next(name.as_str(), None))
            .await
    }
}
