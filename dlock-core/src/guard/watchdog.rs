//! One renewal of a guard's lease: when it is due, and the attempts that make it —
//! retried until the lease is renewed, refused or runs out, raced against the hold's
//! cap and the guard's end. The timetable in `renewals.rs` runs it.

use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;

use super::{GuardState, Shared};
use crate::{DistributedLock, LockError};

/// When the guard's timetable entry comes due: about ttl/3 after the lease was sent
/// (on the process-wide renewal grid when the backend batches renewals, so guards with
/// one TTL renew together), and never after the lease runs out or the hold's cap.
pub(super) fn next_due(shared: &Shared, grid: bool) -> Instant {
    let lease = shared.lease();
    let ttl = lease.ttl();
    // valid_until = sent + ttl - drift, so the send time is this:
    let sent = lease.valid_until() - (ttl - crate::drift_margin(ttl));
    let renew_at = if grid {
        crate::renew_grid::renewal_due(sent, ttl)
    } else {
        sent + ttl / 3
    };
    let due = renew_at.min(lease.valid_until());
    shared.cap().map_or(due, |cap| due.min(cap))
}

/// The guard's due renewal. `true` when the lease was renewed and the guard goes on;
/// `false` when its hold is over: lost (refused, or run out), capped (`Expired`), or
/// ended by its owner meanwhile.
///
/// # Cancel safety
/// Dropping it abandons the attempt in flight; the lease stays as last renewed.
pub(super) async fn renew_when_due(lock: &dyn DistributedLock, shared: &Shared) -> bool {
    let cap = shared.cap();
    if cap.is_some_and(|cap| Instant::now() >= cap) {
        let _ = shared.set_state(GuardState::Expired);
        return false;
    }
    // registered before the state is read, so a release in between ends the attempt
    let mut ended = pin!(shared.ended.notified());
    ended.as_mut().enable();
    if shared.state().is_final() {
        return false;
    }
    let capped = async {
        match cap {
            Some(cap) => tokio::time::sleep_until(cap).await,
            None => std::future::pending().await,
        }
    };
    // the guard's end and the cap first: a release that lands as a retry pause ends
    // must not let one more attempt out (it could renew past a min-hold's linger)
    tokio::select! {
        biased;
        () = ended => false,
        () = capped => {
            let _ = shared.set_state(GuardState::Expired);
            false
        }
        renewed = renew(lock, shared) => renewed,
    }
}

/// Attempts until the lease is renewed (`true`) or lost (`false`). A failed attempt
/// makes the guard suspect and is retried; a refusal, or reaching `valid_until`, makes
/// it lost.
async fn renew(lock: &dyn DistributedLock, shared: &Shared) -> bool {
    let lease = shared.lease();
    let ttl = lease.ttl();
    let retry_pause = (ttl / 20).max(Duration::from_millis(10));
    let attempt_limit = (ttl / 6).max(Duration::from_millis(50));
    loop {
        let now = Instant::now();
        if now >= lease.valid_until() {
            let _ = shared.set_state(GuardState::Lost);
            return false;
        }
        // released (or lost) meanwhile: no attempt for a hold that is over
        if shared.state().is_final() {
            return false;
        }
        let attempt_end = (now + attempt_limit).min(lease.valid_until());
        match tokio::time::timeout_at(attempt_end, lock.renew(&lease)).await {
            Ok(Ok(renewed)) => {
                shared.set_lease(renewed);
                let _ = shared.set_state(GuardState::Held);
                return true;
            }
            Ok(Err(LockError::LeaseLost { .. })) => {
                let _ = shared.set_state(GuardState::Lost);
                return false;
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
                return false;
            }
            // the first failure in a row is a warning, with its reason; the retries
            // that follow are debug lines
            Ok(Err(e)) => {
                if shared.set_state(GuardState::Suspect) {
                    tracing::warn!(lock = %lease.name(), backend = shared.backend, error = %e, "lease suspect: renewal failed; retrying until the lease runs out");
                } else {
                    tracing::debug!(lock = %lease.name(), error = %e, "renewal failed again");
                }
            }
            Err(_) => {
                if shared.set_state(GuardState::Suspect) {
                    tracing::warn!(lock = %lease.name(), backend = shared.backend, timeout = ?attempt_limit, "lease suspect: renewal timed out; retrying until the lease runs out");
                } else {
                    tracing::debug!(lock = %lease.name(), "renewal timed out again");
                }
            }
        }
        let pause_end = (Instant::now() + retry_pause).min(lease.valid_until());
        tokio::time::sleep_until(pause_end).await;
    }
}
