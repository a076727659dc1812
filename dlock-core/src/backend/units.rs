//! Durations as the integers servers take.

use std::time::Duration;

/// Whole milliseconds, saturating (for a TTL checked by [`crate::validate_ttl`] it
/// always fits).
#[must_use]
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Whole microseconds, saturating.
#[must_use]
pub fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Whole milliseconds as an unsigned number, saturating.
#[must_use]
pub fn millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A remaining time a server reported in milliseconds (which may be negative: already
/// past) as a duration; `None` when it reported none.
#[must_use]
pub fn from_millis(ms: Option<i64>) -> Option<Duration> {
    ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_saturate_instead_of_wrapping() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(micros(Duration::from_millis(2)), 2000);
        assert_eq!(millis(Duration::MAX), i64::MAX);
        assert_eq!(micros(Duration::MAX), i64::MAX);
        assert_eq!(millis_u64(Duration::MAX), u64::MAX);
        assert_eq!(from_millis(Some(-1)), Some(Duration::ZERO));
        assert_eq!(from_millis(None), None);
        assert_eq!(from_millis(Some(7)), Some(Duration::from_millis(7)));
    }
}
