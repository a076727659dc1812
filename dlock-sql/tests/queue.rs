//! FIFO hand-off on SQL (issue #34.1): waiters queue in `<table>_queue`, a release
//! grants the lock to the oldest live waiter, and no attempt passes a live queue (by
//! default on PostgreSQL; with `fifo=true` on MySQL and SQLite). Each
//! case fails on the code before the queue (waiters raced after a release, and the
//! lock was free between the release and the winner's attempt).
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::take;
use dlock_core::{DistributedLock, DistributedSemaphore, LockName, random_u64};
use tokio::time::{sleep, timeout};

const LONG: Duration = Duration::from_secs(30);

fn name(case: &str) -> LockName {
    LockName::new(&format!("queue/{case}/{:016x}", random_u64())).unwrap()
}

/// `waiter` waiting (up to `LONG`) for `name` on a task: the waiter and its lease.
fn queue_up(
    waiter: dlock_sql::SqlLock,
    name: &LockName,
) -> tokio::task::JoinHandle<(dlock_sql::SqlLock, dlock_core::Lease)> {
    let name = name.clone();
    tokio::spawn(async move {
        let lease = waiter.acquire(&name, LONG, LONG).await.unwrap();
        (waiter, lease)
    })
}

/// Waits up to `secs` for `waiting`'s lease and releases it; it panics with `late`
/// if none came.
async fn released_within(
    secs: u64,
    waiting: tokio::task::JoinHandle<(dlock_sql::SqlLock, dlock_core::Lease)>,
    late: &str,
) {
    let (waiter, lease) = timeout(Duration::from_secs(secs), waiting)
        .await
        .expect(late)
        .unwrap();
    assert!(waiter.release(&lease).await.unwrap());
}

/// Waiters that started 150 ms apart get the lock in that order, each from the
/// release before it.
async fn waiters_get_the_lock_in_arrival_order(url: &str) {
    const WAITERS: usize = 5;
    let holder = common::connect(url).await;
    let name = name("fifo");
    let held = take(&holder, &name, LONG).await;
    let mut clients = Vec::new();
    for _ in 0..WAITERS {
        clients.push(common::connect(url).await);
    }
    let waiters = common::queue_waiters(clients, &name).await;
    assert!(holder.release(&held).await.unwrap());
    assert_eq!(waiters.order().await, (0..WAITERS).collect::<Vec<_>>());
}

/// The release hands the lock over: read right after it, the lock is held already —
/// by the waiter, with the token its lease then carries — and never looked free.
async fn a_release_grants_the_lock_to_the_waiter(url: &str) {
    let [holder, waiter] = common::connect_n(url).await;
    let name = name("grant");
    let held = take(&holder, &name, LONG).await;
    let waiting = queue_up(waiter, &name);
    sleep(Duration::from_millis(300)).await;
    assert!(holder.release(&held).await.unwrap());
    let after = holder.inspect(&name).await.unwrap();
    let granted = after.expect("the lock is held right after the release: it was granted");
    assert!(
        granted.token > held.token(),
        "the grant carries the next token"
    );
    let (waiter, lease) = timeout(LONG, waiting).await.unwrap().unwrap();
    assert_eq!(
        lease.token(),
        granted.token,
        "the waiter's lease is the grant"
    );
    assert_eq!(&granted.owner, lease.owner());
    assert!(waiter.release(&lease).await.unwrap());
}

/// A newcomer does not take a lock whose holder's lease ran out while someone waits:
/// the queued waiter gets it.
async fn no_attempt_passes_a_live_queue(url: &str) {
    let [holder, waiter, newcomer] = common::connect_n(url).await;
    let name = name("no-barging");
    // a "crashed" holder: the raw lease is never renewed
    let ttl = Duration::from_millis(1500);
    let _crashed = take(&holder, &name, ttl).await;
    let waiting = queue_up(waiter, &name);
    // the waiter is queued; the newcomer keeps trying past the holder's expiry
    sleep(Duration::from_millis(300)).await;
    let mut barged = None;
    for _ in 0..40 {
        if let Some(l) = newcomer.try_acquire(&name, LONG).await.unwrap() {
            barged = Some(l);
            break;
        }
        if waiting.is_finished() {
            break;
        }
        sleep(Duration::from_millis(50)).await;
    }
    assert!(barged.is_none(), "a try_acquire passed the queued waiter");
    let (waiter, lease) = timeout(LONG, waiting).await.unwrap().unwrap();
    assert!(waiter.release(&lease).await.unwrap());
}

/// A client whose last hold of a name it queued for wants the name back: its first
/// attempt goes straight to the queue (its release granted the lock on). It must still
/// queue behind those already waiting, and, when it turns out nobody waits, take the
/// free lock at once with the next token.
async fn a_holder_that_queued_and_wants_the_lock_back_queues_behind_the_others(url: &str) {
    let [first, again] = common::connect_n(url).await;
    let name = name("wants-back");
    let held = take(&first, &name, LONG).await;
    // `again` takes the lock after queueing for it
    let waiting = {
        let (again, name) = (again.clone(), name.clone());
        tokio::spawn(async move { again.acquire(&name, LONG, LONG).await.unwrap() })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(first.release(&held).await.unwrap());
    let queued_for = timeout(LONG, waiting).await.unwrap().unwrap();
    // two waiters queue behind it; then it releases and wants the lock back
    let waiters = common::queue_waiters(
        vec![common::connect(url).await, common::connect(url).await],
        &name,
    )
    .await;
    sleep(Duration::from_millis(150)).await;
    assert!(again.release(&queued_for).await.unwrap());
    let back = again.acquire(&name, LONG, LONG).await.unwrap();
    // while it holds the lock again, both waiters are done: it queued behind them
    let order = timeout(Duration::from_secs(5), waiters.order())
        .await
        .expect("a waiter still waits: the holder that wanted the lock back passed it");
    assert_eq!(order, vec![0, 1]);
    assert!(back.token() > queued_for.token());
    assert!(again.release(&back).await.unwrap());
    // nobody waits now: wanting it back again takes the free lock at once
    let mut last = back;
    for _ in 0..2 {
        let lease = timeout(Duration::from_secs(5), again.acquire(&name, LONG, LONG))
            .await
            .expect("a free lock is taken at once")
            .unwrap();
        assert!(lease.token() > last.token(), "tokens increase");
        assert!(again.release(&lease).await.unwrap());
        last = lease;
    }
}

/// A waiter that gives up leaves the queue: the next release grants past it.
async fn a_waiter_that_gives_up_leaves_the_queue(url: &str) {
    let [holder, quitter, patient] = common::connect_n(url).await;
    let name = name("gives-up");
    let held = take(&holder, &name, LONG).await;
    let gave_up = {
        let name = name.clone();
        tokio::spawn(async move {
            quitter
                .acquire(&name, LONG, Duration::from_millis(400))
                .await
        })
    };
    sleep(Duration::from_millis(150)).await;
    let waiting = queue_up(patient, &name);
    assert!(
        gave_up.await.unwrap().is_err(),
        "the first waiter timed out"
    );
    sleep(Duration::from_millis(300)).await; // its leave is sent in the background
    assert!(holder.release(&held).await.unwrap());
    released_within(5, waiting, "the lock went to the waiter still waiting").await;
}

/// A lock table made by an earlier dlock (no `queued_until` column) gets the column
/// on connect, from two clients at once, and then queues.
async fn a_table_from_before_the_queue_gets_its_column(url: &str) {
    let table = format!("dlock_old_{:08x}", random_u64() as u32);
    let old = match url.split(':').next() {
        Some("postgres") => format!(
            "CREATE TABLE {table} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
             token BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)"
        ),
        Some("mysql") => format!(
            "CREATE TABLE {table} (name VARBINARY(256) NOT NULL PRIMARY KEY,
             owner VARCHAR(255) CHARACTER SET ascii NOT NULL, token BIGINT NOT NULL,
             expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
        ),
        _ => format!(
            "CREATE TABLE {table} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,
             token INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT"
        ),
    };
    common::raw_execute(url, &old).await;
    let sep = if url.contains('?') { '&' } else { '?' };
    let with_table = format!("{url}{sep}table={table}");
    let (a, b) = tokio::join!(common::connect(&with_table), common::connect(&with_table));
    let name = name("old-table");
    let held = take(&a, &name, LONG).await;
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move { (b.acquire(&name, LONG, LONG).await.unwrap(), b) })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(a.release(&held).await.unwrap());
    assert!(
        a.inspect(&name).await.unwrap().is_some(),
        "granted at the release"
    );
    let (lease, b) = timeout(LONG, waiting).await.unwrap().unwrap();
    assert!(b.release(&lease).await.unwrap());
}

/// An exclusive lock named like a semaphore's row key (`sem:<name>`) and that
/// semaphore queue apart: a release of the lock grants it to the lock's own waiter,
/// never to one waiting for a permit.
async fn a_lock_and_a_semaphore_of_the_same_key_queue_apart(url: &str) {
    let [a, b, c, d] = common::connect_n(url).await;
    let base = format!("{:016x}", random_u64());
    let (sem, lock) = (
        LockName::new(&base).unwrap(),
        LockName::new(&format!("sem:{base}")).unwrap(),
    );
    let permit = a.try_acquire_permit(&sem, 1, LONG).await.unwrap().unwrap();
    let held = take(&c, &lock, LONG).await;
    // the semaphore's waiter queues first
    let for_permit = {
        let sem = sem.clone();
        tokio::spawn(async move { b.acquire_permit(&sem, 1, LONG, LONG).await.map(|l| (b, l)) })
    };
    sleep(Duration::from_millis(200)).await;
    let for_lock = queue_up(d, &lock);
    sleep(Duration::from_millis(200)).await;
    assert!(c.release(&held).await.unwrap());
    released_within(
        5,
        for_lock,
        "the lock went to its own waiter, not to the semaphore's",
    )
    .await;
    assert!(a.release(&permit).await.unwrap());
    let (b, permit) = timeout(LONG, for_permit).await.unwrap().unwrap().unwrap();
    assert!(b.release(&permit).await.unwrap());
}

/// A grant made to a polling waiter that vanished before taking it frees the lock
/// when that waiter's entry would have lapsed, not a TTL later: here a "ghost" entry
/// (600 s TTL, live for 800 ms more) is first in line when the holder releases.
async fn a_grant_to_a_vanished_poller_lapses_with_its_entry(url: &str) {
    let [holder, waiter] = common::connect_n(url).await;
    let name = name("ghost");
    let held = take(&holder, &name, LONG).await;
    let now = match url.split(':').next() {
        Some("postgres") => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint",
        Some("mysql") => {
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
        }
        _ => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
    };
    let n = name.as_str();
    common::raw_execute(
        url,
        &format!(
            "INSERT INTO dlock_locks_queue (name, owner, seq, access, permits, ttl_ms, deadline)
             VALUES ('{n}', 'ghost', 0, 'x', 0, 600000, {now} + 800)"
        ),
    )
    .await;
    common::raw_execute(
        url,
        &format!("UPDATE dlock_locks SET queued_until = {now} + 800 WHERE name = '{n}'"),
    )
    .await;
    let waiting = queue_up(waiter, &name);
    sleep(Duration::from_millis(200)).await;
    assert!(holder.release(&held).await.unwrap());
    let ghost = holder
        .inspect(&name)
        .await
        .unwrap()
        .expect("granted to the ghost");
    assert_eq!(ghost.owner.as_str(), "ghost");
    assert!(
        ghost.remaining <= Duration::from_secs(1),
        "the grant lasts no longer than the ghost's entry: {:?}",
        ghost.remaining
    );
    // (a waiter that listens learns nothing of a grant to a poller: it looks again at
    // its next heartbeat, within its notify fallback of 5 s)
    released_within(
        15,
        waiting,
        "the lock went to the live waiter soon after, not a TTL later",
    )
    .await;
}

macro_rules! queue_cases {
    ($($db:ident => $url:expr),* $(,)?) => {$(
        mod $db {
            use super::*;
            queue_cases!(@cases $url;
                waiters_get_the_lock_in_arrival_order,
                a_release_grants_the_lock_to_the_waiter,
                no_attempt_passes_a_live_queue,
                a_table_from_before_the_queue_gets_its_column,
                a_lock_and_a_semaphore_of_the_same_key_queue_apart,
                a_grant_to_a_vanished_poller_lapses_with_its_entry,
                a_holder_that_queued_and_wants_the_lock_back_queues_behind_the_others,
                a_waiter_that_gives_up_leaves_the_queue,
            );
        }
    )*};
    (@cases $url:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            super::$case(&$url).await;
        }
    )*};
}

// PostgreSQL queues by default; MySQL and SQLite (whose waiters poll) when asked
queue_cases! {
    sqlite => format!("{}?fifo=true", common::sqlite_url()),
}
#[cfg(feature = "server-tests")]
queue_cases! {
    postgres => common::postgres_url(),
    mysql => format!("{}?fifo=true", common::mysql_url()),
}
