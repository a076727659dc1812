//! A polling waiter is not starved (MySQL and SQLite by default): a client that
//! releases and asks again at once wins every race against a waiter that polls, so
//! without a bound the waiter could wait forever for a lock that is free a few
//! microseconds in every cycle. A waiter that has polled for ten polling gaps (1 s by
//! default) joins the queue, and from then on the busy client cannot pass it.
//!
//! Fails on the code before the bound: a wait passed 3 s in the lock case 10 times in
//! 12 and in the permit case 2 in 4 (the fault suite's `kill -9 queued waiter` once
//! found two of three workers that had not held the lock once in 6 s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{DistributedLock, DistributedSemaphore, Lease, LockError, LockName, random_u64};
use dlock_sql::SqlLock;
use tokio::time::{Instant, sleep};

const TTL: Duration = Duration::from_secs(30);

/// How many times the waiter waits, and how long each wait may take: the bound (1 s),
/// then the busy client's release granting it the lock and its next poll (100 ms at
/// most), with room to spare.
const ROUNDS: u32 = 15;
const LONGEST_WAIT: Duration = Duration::from_secs(3);

/// What the clients take: the lock, or one semaphore permit of one.
#[derive(Clone, Copy)]
enum Take {
    Lock,
    Permit,
}

impl Take {
    async fn wait(self, c: &SqlLock, name: &LockName, wait: Duration) -> Result<Lease, LockError> {
        match self {
            Self::Lock => c.acquire(name, TTL, wait).await,
            Self::Permit => c.acquire_permit(name, 1, TTL, wait).await,
        }
    }
}

/// One client holds the lock (or the permit) 20 ms at a time and asks again as soon
/// as it released, for as long as the test runs; another waits for it 15 times, each
/// within 3 s.
async fn a_waiter_that_polls_gets_it_from_a_busy_client(url: &str, take: Take) {
    let (busy, waiter) = (common::connect(url).await, common::connect(url).await);
    let name = LockName::new(&format!("starve/{:016x}", random_u64())).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = {
        let (name, stop) = (name.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut cycles = 0_u32;
            while !stop.load(Ordering::Relaxed) {
                let lease = take.wait(&busy, &name, TTL).await.unwrap();
                sleep(Duration::from_millis(20)).await;
                assert!(busy.release(&lease).await.unwrap());
                cycles += 1;
            }
            cycles
        })
    };
    let mut waits = Vec::new();
    for round in 0..ROUNDS {
        // the busy client holds the lock again before the waiter asks
        sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let got = take.wait(&waiter, &name, LONGEST_WAIT).await;
        let got = got.unwrap_or_else(|e| {
            panic!("round {round}: no lock within {LONGEST_WAIT:?} of a busy client's cycles ({e}); waits before: {waits:?}")
        });
        waits.push(started.elapsed());
        assert!(waiter.release(&got).await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let cycles = cycles.await.unwrap();
    assert!(
        cycles > ROUNDS,
        "the busy client held the lock meanwhile: {cycles} cycles"
    );
    eprintln!("waits {waits:?}; the busy client made {cycles} cycles");
}

macro_rules! starvation_cases {
    ($($db:ident => $url:expr),* $(,)?) => {$(
        mod $db {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_waiter_that_polls_gets_the_lock_from_a_busy_client() {
                a_waiter_that_polls_gets_it_from_a_busy_client(&$url, Take::Lock).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_waiter_that_polls_gets_the_permit_from_a_busy_client() {
                a_waiter_that_polls_gets_it_from_a_busy_client(&$url, Take::Permit).await;
            }
        }
    )*};
}

// the backends whose waiters poll by default (PostgreSQL's queue by default)
starvation_cases! {
    mysql => common::mysql_url(),
    sqlite => common::sqlite_url(),
}
