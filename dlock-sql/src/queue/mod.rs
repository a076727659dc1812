//! FIFO hand-off for the exclusive lock: waiters queue in a table beside the lock
//! table, and a release grants the lock to the oldest live waiter.
//!
//! `<table>_queue` has one row per waiting acquisition (`name`, `owner`, `seq`, what
//! it waits for, its TTL, its `deadline` in database-clock ms, and on PostgreSQL the
//! `listener` mark and grant `channel` of the waiter's LISTEN connection).
//! Every change to a name's queue is made in a transaction that first locks the name's
//! row of the lock table (semaphores and read-write locks: their head row), so changes
//! to one name's queue and holder happen one at a time, and each such transaction
//! keeps the lock row's `queued_until` at or above the latest live deadline (the
//! PostgreSQL functions with some slack, `calls`). The lock table's own
//! one-statement acquire and release read that column under the row's lock — never
//! the queue table, which a statement that waited for the row lock would read as it
//! was before it waited — so a waiter that joined just before a release is always
//! seen by it.
//!
//! - A waiter's attempt after its first (`QueueStore::wait_take`, one transaction):
//!   takes a grant made to it, takes a free lock when it is the head (or nobody
//!   waits), hands a free lock to a live head that is not it (a crashed holder's lease
//!   ran out: "the next attempt grants"), and otherwise joins the queue or, already in
//!   it, moves its deadline on (the attempt is its heartbeat). An entry past its
//!   deadline, or (PostgreSQL) whose LISTEN connection is gone — a killed waiter — is
//!   dropped, never granted.
//! - A release is the lock table's one statement, which also tells whether anyone is
//!   queued (`queued_until`); only then a second transaction (`QueueStore::grant_next`)
//!   writes the head as the holder with the next token and its own TTL, removes its
//!   entry and (PostgreSQL) sends `"<owner> <token>"` on the head's own channel: one
//!   notification per hand-off, whatever the number of waiters. Between the two, the
//!   lock is free but a new attempt does not take it: an attempt never passes a live
//!   queue. On PostgreSQL a lock taken after queueing is released by one call that
//!   also grants (`{table}_qrelease1`): the row goes from its holder to the head.
//! - A waiter that stops waiting leaves (`QueueStore::leave`), giving back a grant
//!   made to it that it never took.
//!
//! On PostgreSQL each of these transactions is one call of a server-side function
//! (`calls`; the transactions of `flow` where the functions are missing), and the
//! waiter takes the lock from the grant's message (`dlock_core::backend::grants`: the
//! lease counts from its last "queued" attempt, which the grant followed). A waiter
//! that polls (MySQL, SQLite) finds its grant with its next attempt, the lock table's
//! one statement, which finds the row its own and refreshes the expiry (the lease
//! counts from that attempt).

#[macro_use]
mod calls;
#[macro_use]
mod flow;
mod fragments;
mod statements;

pub(crate) use fragments::release_channel;
pub(crate) use statements::QueueSql;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// What a queue transaction needs, owned, so that it can run on a task of its own to
/// its end even when its caller stops waiting (see `crate::shared`'s flow).
pub(crate) struct TxParts<DB> {
    pub(crate) sql: Arc<QueueSql>,
    /// Statements may be prepared and kept (not behind a transaction pooler).
    pub(crate) persistent: bool,
    /// Run on the connection before `BEGIN` (MySQL: READ COMMITTED, so the queue's
    /// deletes and inserts take no gap locks; every decision is made under the name's
    /// row lock anyway).
    pub(crate) before_begin: Option<String>,
    db: PhantomData<fn() -> DB>,
}

impl<DB> TxParts<DB> {
    pub(crate) fn new(sql: Arc<QueueSql>, persistent: bool, before_begin: Option<String>) -> Self {
        Self {
            sql,
            persistent,
            before_begin,
            db: PhantomData,
        }
    }
}

/// The head of a name's queue: the oldest live waiter.
pub(crate) struct QueueHead {
    pub owner: String,
    pub ttl_ms: i64,
    /// Its grant channel (PostgreSQL), empty when it polls.
    pub channel: String,
    /// What it waits for: `x` the exclusive lock, else a shared tag
    /// (`crate::shared::tag`) with its permit count.
    pub access: String,
    pub permits: i64,
}

/// A waiter's attempt: who, for what, for how long, and how it hears of a grant.
#[derive(Clone, Debug)]
pub(crate) struct QueueRequest {
    /// The lock name, or a semaphore's or read-write lock's key.
    pub name: String,
    /// `x` for the exclusive lock, else the shared tag (`crate::shared::tag`).
    pub access: &'static str,
    /// A semaphore's permit count (else 0).
    pub permits: i64,
    pub owner: String,
    pub ttl: Duration,
    /// How long its entry lives without another attempt.
    pub live: Duration,
    /// Its LISTEN connection's mark (`crate::listen`) and grant channel (PostgreSQL), or `(0, "")`.
    pub listener: (i64, String),
    /// It waits: it joins the queue when it does not get the lock (a `try_acquire`
    /// that found only dead waiters queued does not).
    pub joins: bool,
}

/// What a queued attempt found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    /// The lock is the waiter's, with this token.
    Taken(i64),
    /// Not yet: queued.
    Waiting {
        /// The holder's remaining time, if known.
        remaining: Option<Duration>,
        /// The row's token then, if read (a later grant's is above it).
        counter: Option<u64>,
    },
}

/// The lock row as a queued transaction reads it under its row lock.
pub(crate) struct LockRow {
    pub owner: String,
    /// Milliseconds left of the holder's lease; 0 when the lock is free.
    pub remaining_ms: i64,
    /// The database clock, in ms.
    pub now_ms: i64,
}

/// What a waiter's transaction does, decided from the lock row and the queue's head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The row is already the waiter's (a release granted it): extend it and leave the
    /// queue.
    Confirm,
    /// The lock is free and the waiter is first: take it and leave the queue.
    Take,
    /// The lock is free and another live waiter is first: grant it to that one, then
    /// queue behind.
    GrantHeadThenJoin,
    /// Held: join the queue (or stay, with a new deadline).
    Join,
}

/// The decision of [`QueueStore::wait_take`](crate::store::QueueStore::wait_take).
pub(crate) fn step(row: &LockRow, head: Option<&QueueHead>, owner: &str) -> Step {
    let free = row.remaining_ms <= 0;
    if !free && row.owner == owner {
        Step::Confirm
    } else if free && head.is_none_or(|h| h.owner == owner) {
        Step::Take
    } else if free {
        Step::GrantHeadThenJoin
    } else {
        Step::Join
    }
}

/// The wake-up key of `owner`'s grant (PostgreSQL's listener wakes it).
pub(crate) fn grant_key(owner: &str) -> String {
    format!("grant {owner}")
}

/// The PostgreSQL payload of a grant: `"<owner> <token>"`.
pub(crate) fn grant_payload(owner: &str, token: i64) -> String {
    format!("{owner} {token}")
}

/// Reads a grant payload back.
#[cfg(any(feature = "postgres", test))]
pub(crate) fn parse_grant(payload: &str) -> Option<(&str, i64)> {
    let (owner, token) = payload.rsplit_once(' ')?;
    Some((owner, token.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(owner: &str, remaining_ms: i64) -> LockRow {
        LockRow {
            owner: owner.into(),
            remaining_ms,
            now_ms: 1000,
        }
    }

    fn head(owner: &str) -> QueueHead {
        QueueHead {
            owner: owner.into(),
            ttl_ms: 5000,
            channel: String::new(),
            access: "x".into(),
            permits: 0,
        }
    }

    #[test]
    fn the_head_takes_a_free_lock_and_others_grant_it_to_the_head() {
        assert_eq!(step(&row("", 0), None, "a"), Step::Take);
        assert_eq!(step(&row("", 0), Some(&head("a")), "a"), Step::Take);
        assert_eq!(
            step(&row("old", 0), Some(&head("a")), "b"),
            Step::GrantHeadThenJoin
        );
    }

    #[test]
    fn a_held_lock_is_joined_unless_it_was_granted_to_the_waiter() {
        assert_eq!(step(&row("h", 300), Some(&head("a")), "b"), Step::Join);
        assert_eq!(step(&row("h", 300), None, "b"), Step::Join);
        assert_eq!(step(&row("b", 300), Some(&head("a")), "b"), Step::Confirm);
        // an expired grant of its own is a free lock like any other
        assert_eq!(
            step(&row("b", 0), Some(&head("a")), "b"),
            Step::GrantHeadThenJoin
        );
    }

    #[test]
    fn grant_payloads_read_back() {
        let p = grant_payload("v1.abc:def", 42);
        assert_eq!(parse_grant(&p), Some(("v1.abc:def", 42)));
        assert_eq!(parse_grant("nospace"), None);
        assert_eq!(parse_grant("a b"), None);
    }
}
