//! The election scenario: how fast observers and standbys learn of a resignation,
//! against the backend's raw wake-up (the hand-off floor) measured in the same run.

use std::time::Duration;

use dlock_any::{Election, LockError};
use tokio::time::{Instant, sleep};

use crate::floor_runs::floor_handoff;
use crate::report::Figure;
use crate::scenarios::{TTL, name};
use crate::stats::Samples;

/// `trials` times: a leader leads, a standby campaigns, an observer follows; the
/// leader resigns. Figures: the time from the resignation until the observer reports
/// the standby (`observe`), and until the standby's campaign returns (`failover`),
/// each with the raw protocol's hand-off p50 as its floor.
///
/// # Errors
/// The backend's first error.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn election(url: &str, floor: bool, trials: usize) -> Result<Vec<Figure>, LockError> {
    let n = name("election")?;
    let candidate = |lock| Ok::<_, LockError>(Election::new(lock, n.as_str())?.with_ttl(TTL));
    let leader = candidate(dlock_any::connect(url).await?)?;
    let standby = candidate(dlock_any::connect(url).await?)?;
    let watcher = candidate(dlock_any::connect(url).await?)?;
    let mut changes = watcher.observe();
    changes.next().await?;
    let (mut observed, mut failover) = (Samples::default(), Samples::default());
    for _ in 0..trials.max(1) {
        let lead = leader
            .campaign_for("leader", Duration::from_secs(10))
            .await?;
        while changes.next().await?.is_none_or(|l| l.epoch < lead.epoch()) {}
        let next = {
            let standby = standby.clone();
            tokio::spawn(async move {
                let l = standby
                    .campaign_for("standby", Duration::from_secs(30))
                    .await;
                (l, Instant::now())
            })
        };
        // 100-200 ms: the standby is waiting, and not in step with a poller
        sleep(Duration::from_millis(100 + dlock_any::random_u64() % 100)).await;
        let (epoch, resigned) = (lead.epoch(), Instant::now());
        lead.resign().await?;
        while changes.next().await?.is_none_or(|l| l.epoch <= epoch) {}
        observed.push(resigned.elapsed());
        let (took_over, at) = next
            .await
            .map_err(|e| LockError::backend_msg(e.to_string()))?;
        failover.push(at.saturating_duration_since(resigned));
        took_over?.resign().await?;
    }
    let raw = if floor {
        floor_handoff(url, trials.max(1), crate::floor_runs::Raw::Floor).await?
    } else {
        None
    };
    let raw_p50 = raw.as_ref().map(|s| s.percentile_ms(50.0));
    Ok(vec![
        Figure {
            scenario: "election",
            metric: "observe p50 ms",
            dlock: observed.percentile_ms(50.0),
            floor: raw_p50,
        },
        Figure {
            scenario: "election",
            metric: "observe p99 ms",
            dlock: observed.percentile_ms(99.0),
            floor: raw.as_ref().map(|s| s.percentile_ms(99.0)),
        },
        Figure {
            scenario: "election",
            metric: "failover p50 ms",
            dlock: failover.percentile_ms(50.0),
            floor: raw_p50,
        },
    ])
}
