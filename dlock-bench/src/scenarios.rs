//! The five scenarios of `dlock bench`, on any backend through the trait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dlock_any::{DistributedLock, LockError, LockName, Locker};
use tokio::time::{Instant, sleep};

use crate::process::{CpuClock, rss_bytes};
use crate::stats::Samples;

/// The lease TTL the scenarios use (held: its own TTL).
pub const TTL: Duration = Duration::from_secs(10);

/// A fresh lock name for one scenario run.
///
/// # Errors
/// Never in practice (the name is valid).
pub fn name(scenario: &str) -> Result<LockName, LockError> {
    LockName::new(&format!(
        "bench/{scenario}/{:016x}",
        dlock_any::random_u64()
    ))
}

/// One client, acquire + release of a free lock, back to back: `cycles` measured
/// cycle times after a tenth as many to warm up.
///
/// # Errors
/// The backend's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn uncontended(lock: &dyn DistributedLock, cycles: usize) -> Result<Samples, LockError> {
    let n = name("uncontended")?;
    let mut s = Samples::default();
    for i in 0..cycles + cycles / 10 {
        let t = Instant::now();
        let lease = lock.acquire(&n, TTL, Duration::from_secs(5)).await?;
        lock.release(&lease).await?;
        if i >= cycles / 10 {
            s.push(t.elapsed()); // the first tenth warms connections and caches up
        }
    }
    Ok(s)
}

/// A holder releases while a waiter is blocked in `acquire`: time from the release
/// returning to the waiter holding the lock.
///
/// # Errors
/// The backend's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn handoff(
    holder: Arc<dyn DistributedLock>,
    waiter: Arc<dyn DistributedLock>,
    trials: usize,
) -> Result<Samples, LockError> {
    let n = name("handoff")?;
    let mut s = Samples::default();
    for _ in 0..trials {
        let held = holder.acquire(&n, TTL, Duration::from_secs(5)).await?;
        let w = {
            let (waiter, n) = (Arc::clone(&waiter), n.clone());
            tokio::spawn(async move {
                let l = waiter.acquire(&n, TTL, Duration::from_secs(30)).await;
                (l, Instant::now())
            })
        };
        // 100-200 ms: long enough for the waiter to be waiting, and not in step with a poller
        sleep(Duration::from_millis(100 + dlock_any::random_u64() % 100)).await;
        holder.release(&held).await?;
        let released = Instant::now();
        let (lease, at) = w.await.map_err(|e| LockError::Backend {
            message: e.to_string(),
            source: None,
        })?;
        let lease = lease?;
        s.push(at.saturating_duration_since(released));
        waiter.release(&lease).await?;
    }
    Ok(s)
}

/// Result of the contended scenario.
pub struct Contended {
    /// Acquisitions completed per second.
    pub cycles_per_s: f64,
    /// Time each acquisition spent in `acquire`.
    pub waits: Samples,
}

/// `clients` clients hammer one lock for `duration`.
///
/// # Errors
/// The backend's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn contended(
    clients: Vec<Arc<dyn DistributedLock>>,
    duration: Duration,
) -> Result<Contended, LockError> {
    let n = name("contended")?;
    let end = Instant::now() + duration;
    let mut tasks = Vec::new();
    for c in clients {
        let n = n.clone();
        tasks.push(tokio::spawn(async move {
            let mut waits = Samples::default();
            let mut cycles = 0u64;
            while Instant::now() < end {
                let t = Instant::now();
                let Ok(lease) = c.acquire(&n, TTL, Duration::from_secs(30)).await else {
                    continue;
                };
                waits.push(t.elapsed());
                if Instant::now() <= end {
                    cycles += 1;
                }
                let _ = c.release(&lease).await;
            }
            (cycles, waits)
        }));
    }
    let mut total = 0;
    let mut waits = Samples::default();
    for t in tasks {
        let (c, w) = t.await.map_err(|e| LockError::Backend {
            message: e.to_string(),
            source: None,
        })?;
        total += c;
        waits.extend(w);
    }
    Ok(Contended {
        cycles_per_s: total as f64 / duration.as_secs_f64(),
        waits,
    })
}

/// `tasks` tasks on distinct names over one client for `duration`: cycles per second.
///
/// # Errors
/// The backend's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn parallel(
    lock: Arc<dyn DistributedLock>,
    tasks: usize,
    duration: Duration,
) -> Result<f64, LockError> {
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + duration;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (lock, done, n) = (Arc::clone(&lock), Arc::clone(&done), name("parallel")?);
        handles.push(tokio::spawn(async move {
            while Instant::now() < end {
                if let Ok(l) = lock.acquire(&n, TTL, Duration::from_secs(5)).await {
                    let _ = lock.release(&l).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / duration.as_secs_f64())
}

/// Reads how many requests a server has received so far, from its own statistics.
#[dlock_any::async_trait]
pub trait RequestCounter: Send + Sync {
    /// What is counted, for the report.
    fn describe(&self) -> &'static str;
    /// The server's total so far, if it could be read.
    ///
    /// # Cancel safety
    /// Dropping it stops the measurement where it stands: a lock it holds then is
    /// released by its TTL at the latest.
    async fn requests(&self) -> Option<u64>;
}

/// Result of the held scenario.
pub struct HeldResult {
    /// Locks held.
    pub locks: usize,
    /// Renewal calls made through the trait per second (one per lock per renewal).
    pub renewals_per_s: f64,
    /// Requests per second the server received meanwhile, by its own count (batched
    /// renewals count once), when a [`RequestCounter`] was given.
    pub server_requests_per_s: Option<f64>,
    /// Resident memory added per held lock (the larger of right after acquiring and at
    /// the end of the hold).
    pub rss_bytes_per_lock: f64,
    /// CPU used by this process meanwhile.
    pub cpu_percent: f64,
}

impl HeldResult {
    /// The figures the report shows (no floor: a floor holds nothing).
    #[must_use]
    pub fn figures(&self) -> Vec<crate::Figure> {
        let figure = |metric, dlock| crate::Figure {
            scenario: "held",
            metric,
            dlock,
            floor: None,
        };
        let mut figures = vec![
            figure("locks", self.locks as f64),
            figure("renewals/s", self.renewals_per_s),
        ];
        figures.extend(
            self.server_requests_per_s
                .map(|r| figure("server req/s", r)),
        );
        figures.push(figure("RSS bytes/lock", self.rss_bytes_per_lock));
        figures.push(figure("CPU %", self.cpu_percent));
        figures
    }
}

/// Holds `count` locks with renewing guards for three TTLs; `server` counts what the
/// server received meanwhile.
///
/// # Errors
/// The backend's, or if a guard lost its lock.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn held(
    lock: Arc<dyn DistributedLock>,
    count: usize,
    ttl: Duration,
    server: Option<&dyn RequestCounter>,
) -> Result<HeldResult, LockError> {
    let counting = Arc::new(Counting {
        inner: lock,
        renewals: AtomicU64::new(0),
    });
    let locker = Locker::new(Arc::clone(&counting) as Arc<dyn DistributedLock>)
        .with_ttl(ttl)
        .with_wait(Duration::from_secs(10));
    let rss_before = rss_bytes();
    let mut guards = Vec::with_capacity(count);
    let prefix = format!("bench/held/{:016x}", dlock_any::random_u64());
    for i in 0..count {
        guards.push(locker.lock(format!("{prefix}/{i}")).await?);
    }
    let rss_held = rss_bytes();
    let s0 = match server {
        Some(s) => s.requests().await,
        None => None,
    };
    let (cpu0, t0, r0) = (
        CpuClock::now(),
        Instant::now(),
        counting.renewals.load(Ordering::Relaxed),
    );
    sleep(ttl * 3).await;
    let elapsed = t0.elapsed().as_secs_f64();
    let renewals = counting.renewals.load(Ordering::Relaxed) - r0;
    let s1 = match server {
        Some(s) => s.requests().await,
        None => None,
    };
    let server_requests_per_s = s0
        .zip(s1)
        .map(|(a, b)| b.saturating_sub(a) as f64 / elapsed);
    let cpu = cpu0.elapsed().as_secs_f64();
    // at the end of the hold, with renewals running: the steady state, and never less
    // than what holding them cost right after acquiring
    let rss_end = rss_bytes();
    let rss_held = rss_held.max(rss_end);
    let held_ok = guards.iter().filter(|g| g.is_held()).count();
    for g in guards {
        let _ = g.release().await;
    }
    if held_ok < count {
        return Err(LockError::Backend {
            message: format!("only {held_ok} of {count} guards still held"),
            source: None,
        });
    }
    Ok(HeldResult {
        locks: count,
        renewals_per_s: renewals as f64 / elapsed,
        server_requests_per_s,
        rss_bytes_per_lock: rss_held.saturating_sub(rss_before) as f64 / count as f64,
        cpu_percent: cpu / elapsed * 100.0,
    })
}

/// Counts renew calls on their way to the backend.
struct Counting {
    inner: Arc<dyn DistributedLock>,
    renewals: AtomicU64,
}

#[dlock_any::async_trait]
impl DistributedLock for Counting {
    async fn acquire_with(
        &self,
        request: &dlock_any::Acquisition<'_>,
    ) -> Result<Option<dlock_any::Lease>, LockError> {
        self.inner.acquire_with(request).await
    }
    async fn renew(&self, lease: &dlock_any::Lease) -> Result<dlock_any::Lease, LockError> {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &dlock_any::Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn inspect(&self, name: &LockName) -> Result<Option<dlock_any::LockInfo>, LockError> {
        self.inner.inspect(name).await
    }
    fn capabilities(&self) -> dlock_any::Capabilities {
        self.inner.capabilities()
    }
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
}

/// The client CPU the instrumentation (spans and metrics) adds to an acquire + release
/// cycle, in µs: the in-memory backend with and without it, alternating rounds.
pub(crate) async fn instrumentation_cost() -> Result<f64, dlock_any::LockError> {
    const CYCLES: usize = 20_000;
    let with = dlock_any::connect("memory://").await?;
    let without = dlock_any::connect_coordination("memory://").await?;
    let (mut with_cpu, mut without_cpu) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..3 {
        let cpu = crate::process::CpuClock::now();
        uncontended(&*with, CYCLES).await?;
        with_cpu += cpu.elapsed();
        let cpu = crate::process::CpuClock::now();
        uncontended(&*without, CYCLES).await?;
        without_cpu += cpu.elapsed();
    }
    let per_cycle = |d: Duration| d.as_secs_f64() * 1e6 / (3.0 * CYCLES as f64 * 1.1);
    Ok((per_cycle(with_cpu) - per_cycle(without_cpu)).max(0.0))
}
