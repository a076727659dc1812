//! The semaphore and read-write lock scenarios: each side through `SharedLock`, so the
//! mutex scenarios measure it; the cycle is set against the backend's mutex floor (the
//! fewest server commands for one lock cycle), since no peer offers a raw version of
//! these primitives to compare with.

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{Coordination, DistributedLock, LockError, SharedLock};
use tokio::time::Instant;

use crate::floor::Floor;
use crate::floor_runs::floor_error;
use crate::stats::Samples;
use crate::{Figure, scenarios};

/// Permits of the semaphore scenarios.
pub const PERMITS: u32 = 3;

/// One side as a lock, boxed as the scenarios take it.
fn side(
    backend: &Arc<dyn Coordination>,
    which: &str,
) -> Result<Arc<dyn DistributedLock>, LockError> {
    Ok(Arc::new(match which {
        "permit" => SharedLock::permits(Arc::clone(backend), PERMITS)?,
        "read" => SharedLock::reads(Arc::clone(backend)),
        _ => SharedLock::writes(Arc::clone(backend)),
    }))
}

async fn clients(
    url: &str,
    n: usize,
    which: &str,
) -> Result<Vec<Arc<dyn DistributedLock>>, LockError> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(side(&dlock_any::connect_coordination(url).await?, which)?);
    }
    Ok(v)
}

/// Uncontended cycles of `which` (p50, p99) next to the mutex floor's, in alternating
/// rounds so both see the same load.
async fn cycle(
    lock: &dyn DistributedLock,
    floor: Option<&dyn Floor>,
    cycles: usize,
    scenario: &'static str,
    what: (&'static str, &'static str),
) -> Result<Vec<Figure>, LockError> {
    let per_round = (cycles / 3).max(10);
    let (mut ours, mut raw) = (Samples::default(), Samples::default());
    for _ in 0..3 {
        ours.extend(scenarios::uncontended(lock, per_round).await?);
        if let Some(f) = floor {
            for i in 0..per_round + per_round / 10 {
                let t = Instant::now();
                f.cycle().await.map_err(floor_error)?;
                if i >= per_round / 10 {
                    raw.push(t.elapsed());
                }
            }
        }
    }
    Ok(Figure::p50_p99(scenario, [what.0, what.1], &ours, floor.map(|_| &raw)).into())
}

/// `dlock bench --scenario semaphore`: the permit cycle against the mutex floor, a
/// one-permit hand-off, and `clients` clients on a 3-permit semaphore.
///
/// # Errors
/// The backend's or the floor's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn semaphore(
    url: &str,
    floor: Option<&dyn Floor>,
    cycles: usize,
    trials: usize,
    n_clients: usize,
    duration: Duration,
) -> Result<Vec<Figure>, LockError> {
    let backend = dlock_any::connect_coordination(url).await?;
    let permit = side(&backend, "permit")?;
    let mut out = cycle(
        &*permit,
        floor,
        cycles,
        "semaphore",
        ("permit cycle p50 ms", "permit cycle p99 ms"),
    )
    .await?;
    let one = |b: Arc<dyn Coordination>| -> Result<Arc<dyn DistributedLock>, LockError> {
        Ok(Arc::new(SharedLock::permits(b, 1)?))
    };
    let handoff = scenarios::handoff(
        one(dlock_any::connect_coordination(url).await?)?,
        one(dlock_any::connect_coordination(url).await?)?,
        trials,
    )
    .await?;
    out.push(Figure {
        scenario: "semaphore",
        metric: "hand-off p50 ms",
        dlock: handoff.percentile_ms(50.0),
        floor: None,
    });
    let c = scenarios::contended(clients(url, n_clients, "permit").await?, duration).await?;
    out.push(Figure {
        scenario: "semaphore",
        metric: "3 permits, cycles/s",
        dlock: c.cycles_per_s,
        floor: None,
    });
    Ok(out)
}

/// `dlock bench --scenario rwlock`: the read and write cycles against the mutex floor,
/// and readers and writers (one in four) contending on one name.
///
/// # Errors
/// The backend's or the floor's.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn rwlock(
    url: &str,
    floor: Option<&dyn Floor>,
    cycles: usize,
    n_clients: usize,
    duration: Duration,
) -> Result<Vec<Figure>, LockError> {
    let backend = dlock_any::connect_coordination(url).await?;
    let mut out = cycle(
        &*side(&backend, "read")?,
        floor,
        cycles,
        "rwlock",
        ("read cycle p50 ms", "read cycle p99 ms"),
    )
    .await?;
    out.extend(
        cycle(
            &*side(&backend, "write")?,
            floor,
            cycles,
            "rwlock",
            ("write cycle p50 ms", "write cycle p99 ms"),
        )
        .await?,
    );
    let writers = n_clients.div_ceil(4);
    let mut all = clients(url, writers, "write").await?;
    all.extend(clients(url, n_clients - writers, "read").await?);
    let c = scenarios::contended(all, duration).await?;
    out.push(Figure {
        scenario: "rwlock",
        metric: "mixed 1:3, cycles/s",
        dlock: c.cycles_per_s,
        floor: None,
    });
    Ok(out)
}
