//! Human-readable durations for URLs and the command line.

use std::time::Duration;

use crate::LockError;

/// Parses `250ms`, `30s`, `5m`, `2h`, `1d`, or a bare number of seconds; `forever` is
/// [`Duration::MAX`].
///
/// ```
/// use std::time::Duration;
/// use dlock_core::parse_duration;
/// assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
/// assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
/// assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
/// assert_eq!(parse_duration("forever").unwrap(), Duration::MAX);
/// assert!(parse_duration("soon").is_err());
/// ```
///
/// # Errors
/// [`LockError::InvalidArgument`] naming the bad text.
pub fn parse_duration(text: &str) -> Result<Duration, LockError> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("forever") || t.eq_ignore_ascii_case("inf") {
        return Ok(Duration::MAX);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || {
        LockError::InvalidArgument(format!(
            "cannot read {text:?} as a duration (examples: 500ms, 30s, 5m, 1h, forever)"
        ))
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" | "sec" | "secs" => value,
        "m" | "min" | "mins" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        _ => return Err(bad()),
    };
    if !seconds.is_finite() || !(0.0..=1e12).contains(&seconds) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Formats a duration the way [`parse_duration`] reads it, rounded for people.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    if d == Duration::MAX {
        "forever".into()
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(120) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(
            parse_duration(" 3h ").unwrap(),
            Duration::from_secs(3 * 3600)
        );
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        for bad in ["", "-1s", "1y", "ms", "1.2.3s", "NaNs"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formats_round_trip_roughly() {
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m5s");
        assert_eq!(format_duration(Duration::MAX), "forever");
    }
}
