//! The bounds of a lock call: the TTLs accepted, how long a wait for a holder's change
//! sleeps where nothing wakes it, and what a wait answered.

use std::time::Duration;

use crate::{Lease, LockError, LockInfo, LockName};

/// What a wait answered, as a lease: `Ok(None)` — which a wait never answers — is read
/// as the wait running out.
///
/// # Errors
/// The acquisition's error, or [`LockError::Timeout`].
pub fn waited(
    answer: Result<Option<Lease>, LockError>,
    name: &LockName,
    wait: Duration,
) -> Result<Lease, LockError> {
    answer?.ok_or_else(|| LockError::Timeout {
        name: name.to_string(),
        waited: wait,
    })
}

/// The shortest TTL accepted: below this the drift margin would eat the lease.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest TTL accepted (7 days). Longer work should renew (see [`crate::Locker`]).
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long to sleep before looking at a holder again when nothing will wake us: at
/// most [`HOLDER_POLL`], and not past the holder's expiry or `until`.
#[must_use]
pub fn poll_until(seen: Option<&LockInfo>, until: tokio::time::Instant) -> tokio::time::Instant {
    let mut next = tokio::time::Instant::now() + HOLDER_POLL;
    if let Some(info) = seen {
        next = next.min(tokio::time::Instant::now() + info.remaining);
    }
    next.min(until)
}

/// The longest pause between two looks at a holder on a backend without notifications.
pub const HOLDER_POLL: Duration = Duration::from_millis(100);

/// Checks a requested TTL against [`MIN_TTL`] and [`MAX_TTL`].
///
/// # Errors
/// [`LockError::InvalidArgument`] when it is out of range.
pub fn validate_ttl(ttl: Duration) -> Result<(), LockError> {
    if ttl < MIN_TTL {
        return Err(LockError::InvalidArgument(format!(
            "ttl {ttl:?} is shorter than the minimum {MIN_TTL:?}"
        )));
    }
    if ttl > MAX_TTL {
        return Err(LockError::InvalidArgument(format!(
            "ttl {ttl:?} is longer than the maximum {MAX_TTL:?}; renew instead"
        )));
    }
    Ok(())
}
