//! A guard's watchdog: renews the lease until it is lost or its hold limit is reached.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{GuardState, Shared};
use crate::{DistributedLock, LockError};

/// Renews at about ttl/3 after each successful renewal; on the process-wide renewal
/// grid when the backend batches renewals, so guards with one TTL renew together. A
/// failed attempt makes the guard suspect and is retried; a refusal, or reaching
/// `valid_until`, makes it lost.
pub(super) async fn watchdog(lock: Arc<dyn DistributedLock>, shared: Arc<Shared>, grid: bool) {
    let cap = shared
        .policy
        .max_hold
        .and_then(|m| shared.acquired.checked_add(m));
    let stop = async {
        match cap {
            Some(cap) => tokio::time::sleep_until(cap).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = renew_until_lost(lock, Arc::clone(&shared), grid) => {}
        () = stop => {
            let _ = shared.set_state(GuardState::Expired);
        }
    }
}

/// The watchdog's renewals, until the lease is lost.
async fn renew_until_lost(lock: Arc<dyn DistributedLock>, shared: Arc<Shared>, grid: bool) {
    loop {
        let lease = shared.lease();
        let ttl = lease.ttl();
        // valid_until = sent + ttl - drift, so the send time is this:
        let sent = lease.valid_until() - (ttl - crate::drift_margin(ttl));
        let renew_at = if grid {
            crate::renew_grid::renewal_due(sent, ttl)
        } else {
            sent + ttl / 3
        };
        tokio::time::sleep_until(renew_at.min(lease.valid_until())).await;
        let retry_pause = (ttl / 20).max(Duration::from_millis(10));
        let attempt_limit = (ttl / 6).max(Duration::from_millis(50));
        loop {
            let now = Instant::now();
            if now >= lease.valid_until() {
                let _ = shared.set_state(GuardState::Lost);
                return;
            }
            let attempt_end = (now + attempt_limit).min(lease.valid_until());
            match tokio::time::timeout_at(attempt_end, lock.renew(&lease)).await {
                Ok(Ok(renewed)) => {
                    shared.set_lease(renewed);
                    let _ = shared.set_state(GuardState::Held);
                    break;
                }
                Ok(Err(LockError::LeaseLost { .. })) => {
                    let _ = shared.set_state(GuardState::Lost);
                    return;
                }
                // An answer that no retry can change (e.g. a lease renewed through a
                // client that did not take it): the lease will run out, so say so now
                // rather than stay "suspect" until it does.
                Ok(Err(
                    e @ (LockError::InvalidArgument(_)
                    | LockError::Config(_)
                    | LockError::InvalidName { .. }),
                )) => {
                    tracing::warn!(lock = %lease.name(), error = %e, "renewal refused for good; the lease is lost");
                    let _ = shared.set_state(GuardState::Lost);
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(lock = %lease.name(), error = %e, "renewal failed; retrying until the lease runs out");
                    let _ = shared.set_state(GuardState::Suspect);
                }
                Err(_) => {
                    tracing::debug!(lock = %lease.name(), "renewal timed out; retrying until the lease runs out");
                    let _ = shared.set_state(GuardState::Suspect);
                }
            }
            let pause_end = (Instant::now() + retry_pause).min(lease.valid_until());
            tokio::time::sleep_until(pause_end).await;
        }
    }
}
