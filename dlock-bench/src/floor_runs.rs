//! The floor's side of the hand-off, contended and parallel scenarios, run the way
//! `scenarios` runs dlock's.

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockError};
use tokio::time::Instant;

use crate::stats::Samples;
use crate::{floor, floor_wait};

/// Which raw blocking lock a hand-off or contended round runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Raw {
    /// The floor's (see [`floor_wait::for_url`]).
    Floor,
    /// The peer's, where the backend has one ([`crate::peer`]).
    Peer,
}

/// A new client of the `raw` lock on `name`, if the URL's backend has one.
///
/// # Cancel safety
/// Dropping it drops the connection being opened.
pub(crate) async fn connect(
    raw: Raw,
    url: &str,
    name: &str,
) -> Option<Result<Box<dyn floor_wait::FloorWaiter>, String>> {
    match raw {
        Raw::Floor => floor_wait::for_url(url, name).await,
        Raw::Peer => crate::peer::waiter(url, name).await,
    }
}

pub(crate) async fn connect_many(
    url: &str,
    n: usize,
) -> Result<Vec<Arc<dyn DistributedLock>>, LockError> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(dlock_any::connect(url).await?);
    }
    Ok(v)
}

/// The hand-off scenario on the `raw` blocking lock, where the backend has one: time
/// from the holder's release returning to the blocked waiter holding.
pub(crate) async fn floor_handoff(
    url: &str,
    trials: usize,
    raw: Raw,
) -> Result<Option<Samples>, LockError> {
    let name = format!("{:016x}", dlock_any::random_u64());
    let Some(holder) = connect(raw, url, &name).await else {
        return Ok(None);
    };
    let holder = holder.map_err(floor_error)?;
    let waiter: Arc<dyn floor_wait::FloorWaiter> = Arc::from(
        connect(raw, url, &name)
            .await
            .ok_or_else(|| floor_error("no second floor client".into()))?
            .map_err(floor_error)?,
    );
    let mut s = Samples::default();
    for _ in 0..trials {
        holder.lock().await.map_err(floor_error)?;
        let w = Arc::clone(&waiter);
        let blocked = tokio::spawn(async move { w.lock().await.map(|()| Instant::now()) });
        tokio::time::sleep(Duration::from_millis(100 + dlock_any::random_u64() % 100)).await;
        holder.unlock().await.map_err(floor_error)?;
        let released = Instant::now();
        let at = blocked
            .await
            .map_err(|e| floor_error(e.to_string()))?
            .map_err(floor_error)?;
        s.push(at.saturating_duration_since(released));
        waiter.unlock().await.map_err(floor_error)?;
    }
    Ok(Some(s))
}

/// The contended scenario on the `raw` blocking lock: `clients` clients, each on its
/// own connection, on one name for `duration`. Cycles per second and each wait.
pub(crate) async fn floor_contended(
    url: &str,
    clients: usize,
    duration: Duration,
    raw: Raw,
) -> Result<Option<(f64, Samples)>, LockError> {
    let name = format!("{:016x}", dlock_any::random_u64());
    let mut waiters = Vec::with_capacity(clients);
    for _ in 0..clients {
        match connect(raw, url, &name).await {
            Some(w) => waiters.push(w.map_err(floor_error)?),
            None => return Ok(None),
        }
    }
    let end = Instant::now() + duration;
    let mut set = tokio::task::JoinSet::new();
    for w in waiters {
        set.spawn(async move {
            let (mut cycles, mut waits) = (0u64, Samples::default());
            while Instant::now() < end {
                let t = Instant::now();
                w.lock().await?;
                waits.push(t.elapsed());
                if Instant::now() <= end {
                    cycles += 1;
                }
                w.unlock().await?;
            }
            Ok::<_, String>((cycles, waits))
        });
    }
    let (mut total, mut waits) = (0, Samples::default());
    for r in set.join_all().await {
        let (c, w) = r.map_err(floor_error)?;
        total += c;
        waits.extend(w);
    }
    Ok(Some((total as f64 / duration.as_secs_f64(), waits)))
}

/// The parallel scenario on the floor: `tasks` tasks, each cycling its own lock name
/// over the floor's shared connections.
pub(crate) async fn floor_parallel(
    floor: &dyn floor::Floor,
    tasks: usize,
    duration: Duration,
) -> Result<f64, LockError> {
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    let mut forks = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        forks.push(floor.fork().await.map_err(floor_error)?);
    }
    let end = Instant::now() + duration;
    for f in forks {
        let done = Arc::clone(&done);
        set.spawn(async move {
            while Instant::now() < end {
                f.cycle().await?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<(), String>(())
        });
    }
    for r in set.join_all().await {
        r.map_err(floor_error)?;
    }
    Ok(done.load(std::sync::atomic::Ordering::Relaxed) as f64 / duration.as_secs_f64())
}

pub(crate) fn floor_error(e: String) -> LockError {
    LockError::Backend {
        message: format!("floor: {e}"),
        source: None,
    }
}
