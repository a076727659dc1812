//! Rule 9: a waiter is not starved by a client that releases and asks again at once.
//!
//! Such a client leaves the lock free for a few microseconds per cycle. A queue on the
//! server (etcd, ZooKeeper, Redis's tagged layout, PostgreSQL) serves the waiter at the
//! next release; a waiter woken by a message (Redis's plain layout, Redlock) would race
//! the busy client once per cycle and lose most races (waits of up to 2.4 s, and one
//! failed CI run), so a release that reached a listener keeps its client back 5 ms on
//! that name (`dlock-redis`'s `courtesy.rs`; waits of 2–10 ms since); a waiter that
//! polls (MySQL, SQLite, PostgreSQL behind a transaction pooler) would lose every race
//! — dlock's SQL adapter makes one that polled for ten polling gaps join the queue.
//! Without that bound this case fails on SQLite (2 runs of 2).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{Lease, LockError, LockName};
use tokio::time::{Instant, sleep, timeout};

use super::{LONG_TTL, offers_shared, unique};
use crate::{Harness, TestClient};

/// How many times the waiter waits, and how long each wait may take: a poller's bound
/// (1 s by default), then the busy client's release and the next poll, with room.
const ROUNDS: u32 = 5;
const LONGEST_WAIT: Duration = Duration::from_secs(3);
/// How long the busy client holds each time.
const HOLD: Duration = Duration::from_millis(20);

/// What both clients take: the lock, or the one permit of a 1-permit semaphore.
#[derive(Clone, Copy, Debug)]
enum Take {
    Lock,
    Permit,
}

impl Take {
    async fn wait(
        self,
        c: &TestClient,
        name: &LockName,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        match self {
            Self::Lock => c.acquire(name, LONG_TTL, wait).await,
            Self::Permit => c.acquire_permit(name, 1, LONG_TTL, wait).await,
        }
    }
}

/// One client holds the lock 20 ms at a time and asks again as soon as it released;
/// another waits for it five times, each within 3 s. The same with a 1-permit
/// semaphore where the backend offers semaphores.
pub async fn a_busy_client_does_not_starve_a_waiter(h: &impl Harness) {
    let name = unique("a_busy_client_does_not_starve_a_waiter");
    busy_client_and_waiter(h, name, Take::Lock).await;
    let name = unique("a_busy_client_does_not_starve_a_permit_waiter");
    if offers_shared(&h.client().await, &name).await {
        busy_client_and_waiter(h, name, Take::Permit).await;
    }
}

async fn busy_client_and_waiter(h: &impl Harness, name: LockName, take: Take) {
    let (busy, waiter) = (h.client().await, h.client().await);
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = {
        let (name, stop) = (name.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut cycles = 0_u32;
            while !stop.load(Ordering::Relaxed) {
                let lease = take
                    .wait(&busy, &name, LONG_TTL)
                    .await
                    .expect("busy client");
                sleep(HOLD).await;
                assert!(busy.release(&lease).await.expect("busy client's release"));
                cycles += 1;
            }
            cycles
        })
    };
    let mut waits = Vec::new();
    for round in 0..ROUNDS {
        // the busy client holds it again before the waiter asks
        sleep(HOLD * 2).await;
        let started = Instant::now();
        let lease = take.wait(&waiter, &name, LONGEST_WAIT).await;
        let lease = lease.unwrap_or_else(|e| {
            panic!("{take:?} round {round}: nothing within {LONGEST_WAIT:?} of a busy client's cycles ({e}); waits before: {waits:?}")
        });
        waits.push(started.elapsed());
        assert!(waiter.release(&lease).await.expect("waiter's release"));
    }
    stop.store(true, Ordering::Relaxed);
    let cycles = timeout(LONGEST_WAIT * 2, cycles)
        .await
        .expect("the busy client stops")
        .expect("join");
    assert!(
        cycles > ROUNDS,
        "{take:?}: the busy client held it between the waits too: {cycles} cycles"
    );
}
