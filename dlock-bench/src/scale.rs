//! The scale scenario: how the costs grow with the work — blocked waiters on one name,
//! locks held at once, distinct names over time.

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockError};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};

use crate::floor_runs::connect_many;
use crate::footprint::Footprint;
use crate::scenarios::{self, RequestCounter};

/// The numbers of waiters measured, up to the run's maximum.
pub const WAITERS: [usize; 4] = [1, 10, 100, 1000];
/// The numbers of held locks measured, up to the run's maximum.
pub const HELD: [usize; 3] = [1_000, 10_000, 100_000];

/// What `n` waiters on one name cost.
#[derive(Clone, Copy, Debug)]
pub struct Waiters {
    /// Mean time per hand-off while the queue drains, ms.
    pub handoff_ms: f64,
    /// Server requests per hand-off while it drains (each waiter's acquire and release
    /// included: two is the least), when the server counts them.
    pub requests_per_handoff: Option<f64>,
    /// Server requests per second per blocked waiter while nothing is released (a
    /// polling backend's price; 0 on push backends).
    pub idle_requests_per_waiter_s: Option<f64>,
}

/// `n` waiters, spread over `clients` clients (connections, as processes would have),
/// queue on one held name; their requests are counted for a second while they wait;
/// then the holder releases and each waiter, in turn, takes the lock and releases it.
///
/// # Errors
/// The backend's first error.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn waiters(
    url: &str,
    n: usize,
    clients: usize,
    counter: Option<&dyn RequestCounter>,
) -> Result<Waiters, LockError> {
    const TTL: Duration = Duration::from_secs(60);
    let locks = connect_many(url, clients.max(1)).await?;
    let name = scenarios::name("scale-waiters")?;
    let holder = locks[0]
        .acquire(&name, TTL, Duration::from_secs(10))
        .await?;
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let (lock, name) = (Arc::clone(&locks[i % locks.len()]), name.clone());
        tasks.spawn(async move {
            let lease = lock.acquire(&name, TTL, Duration::from_secs(300)).await?;
            lock.release(&lease).await.map(|_| ())
        });
    }
    // let them queue (each waiter's first attempt and registration), then count what
    // waiting alone costs the server
    sleep(Duration::from_millis(500 + 3 * n as u64)).await;
    let idle = Duration::from_secs(1);
    let quiet_before = count(counter).await;
    sleep(idle).await;
    let quiet_after = count(counter).await;

    let before = count(counter).await;
    let started = Instant::now();
    locks[0].release(&holder).await?;
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| LockError::transient(format!("a waiter failed: {e}")))??;
    }
    let elapsed = started.elapsed();
    let after = count(counter).await;
    let per = |a: Option<u64>, b: Option<u64>, by: f64| Some(b?.saturating_sub(a?) as f64 / by);
    Ok(Waiters {
        handoff_ms: elapsed.as_secs_f64() * 1e3 / n as f64,
        requests_per_handoff: per(before, after, n as f64),
        idle_requests_per_waiter_s: per(quiet_before, quiet_after, n as f64 * idle.as_secs_f64()),
    })
}

/// What `names` distinct names, each acquired and released once, left behind on the
/// server.
#[derive(Clone, Copy, Debug)]
pub struct Names {
    /// Records (rows, keys, nodes) left per 1 000 names.
    pub records_per_1000: Option<f64>,
    /// Bytes of server storage per name, where the server reports its size.
    pub bytes_per_name: Option<f64>,
    /// Cycles per second while going through them.
    pub cycles_per_s: f64,
}

/// Acquires and releases `names` distinct names once each (64 at a time), and reads
/// how much the server keeps afterwards.
///
/// # Errors
/// The backend's first error.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn names(
    lock: Arc<dyn DistributedLock>,
    url: &str,
    names: usize,
) -> Result<Names, LockError> {
    const TASKS: usize = 64;
    let probe = Footprint::for_url(url);
    let before = probe.read().await;
    let run = scenarios::name("scale-names")?;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for t in 0..TASKS {
        let (lock, run) = (Arc::clone(&lock), run.clone());
        tasks.spawn(async move {
            for i in (t..names).step_by(TASKS) {
                let name = dlock_any::LockName::new(&format!("{}-{i}", run.as_str()))?;
                let lease = lock
                    .acquire(&name, Duration::from_secs(30), Duration::from_secs(30))
                    .await?;
                lock.release(&lease).await?;
            }
            Ok::<(), LockError>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| LockError::transient(format!("a task failed: {e}")))??;
    }
    let cycles_per_s = names as f64 / started.elapsed().as_secs_f64();
    let after = probe.read().await;
    let grew = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?) as f64);
    Ok(Names {
        records_per_1000: grew(before.records, after.records).map(|r| r * 1000.0 / names as f64),
        bytes_per_name: grew(before.bytes, after.bytes).map(|b| b / names as f64),
        cycles_per_s,
    })
}

async fn count(counter: Option<&dyn RequestCounter>) -> Option<u64> {
    match counter {
        Some(c) => c.requests().await,
        None => None,
    }
}
