//! Jittered waiting for adapters whose servers cannot notify waiters.

use std::time::Duration;

use tokio::time::Instant;

use crate::token::random_u64;

/// Exponential backoff with full jitter, capped, for polling a busy lock.
///
/// Each [`Backoff::next_delay`] is a random duration in `[floor, cap]` where the cap
/// doubles from `initial` up to `max`, and is further capped by a hint such as the
/// holder's remaining lease time (no point sleeping past the moment the lock frees).
#[derive(Clone, Debug)]
pub struct Backoff {
    current: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff starting at `initial` and growing to `max`.
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            current: initial,
            max,
        }
    }

    /// The next delay, never longer than `hint` (plus one millisecond so that a
    /// holder's expiry has passed on the server when we look again).
    pub fn next_delay(&mut self, hint: Option<Duration>) -> Duration {
        let cap = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = cap / 2;
        let jitter_range = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        let jittered = half + Duration::from_micros(random_u64() % jitter_range);
        match hint {
            Some(h) => jittered.min(h + Duration::from_millis(1)),
            None => jittered,
        }
    }
}

/// The end of an `acquire`'s `wait` budget.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    start: Instant,
    end: Instant,
}

impl Deadline {
    /// A deadline `wait` from now. Huge waits saturate to about 100 years.
    #[must_use]
    pub fn after(wait: Duration) -> Self {
        let start = Instant::now();
        let end = start
            .checked_add(wait)
            .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 24 * 3600));
        Self { start, end }
    }

    /// When waiting started.
    #[must_use]
    pub fn start(&self) -> Instant {
        self.start
    }

    /// When waiting must stop.
    #[must_use]
    pub fn end(&self) -> Instant {
        self.end
    }

    /// Time left (zero when passed).
    #[must_use]
    pub fn remaining(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// `true` once the deadline has passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        Instant::now() >= self.end
    }

    /// How long the caller has waited so far.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_stay_within_bounds_and_respect_hint() {
        let mut b = Backoff::new(Duration::from_millis(4), Duration::from_millis(50));
        for _ in 0..20 {
            let d = b.next_delay(None);
            assert!(
                d >= Duration::from_millis(2) && d <= Duration::from_millis(50),
                "{d:?}"
            );
        }
        let d = b.next_delay(Some(Duration::from_millis(3)));
        assert!(d <= Duration::from_millis(4));
    }

    #[test]
    fn huge_wait_saturates() {
        let d = Deadline::after(Duration::MAX);
        assert!(!d.passed());
        assert!(d.remaining() > Duration::from_secs(3600));
    }
}
