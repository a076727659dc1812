//! Human-readable durations for URLs and the command line.

use std::time::Duration;

use crate::LockError;

/// Parses a duration as [`humantime`] reads it — `250ms`, `30s`, `5m`, `1h30m`,
/// `1h 30m`, `2d`, `1w` — or a bare number of seconds (`30`, `0.5`); `forever` (or
/// `inf`) is [`Duration::MAX`]. At most 10¹² s.
///
/// ```
/// use std::time::Duration;
/// use dlock_core::parse_duration;
/// assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
/// assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
/// assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_duration("1w").unwrap(), Duration::from_secs(7 * 86_400));
/// assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
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
    let bad = |why: &dyn std::fmt::Display| {
        LockError::InvalidArgument(format!(
            "cannot read {text:?} as a duration: {why} (examples: 500ms, 30s, 1h30m, 2d, 1w, forever)"
        ))
    };
    if t.starts_with('-') {
        return Err(bad(&"a duration cannot be negative"));
    }
    // a bare number is seconds (humantime wants a unit)
    let d = if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let seconds: f64 = t.parse().map_err(|e| bad(&e))?;
        Duration::try_from_secs_f64(seconds).map_err(|e| bad(&e))?
    } else {
        humantime::parse_duration(t).map_err(|e| bad(&e))?
    };
    if d > Duration::from_secs(1_000_000_000_000) {
        return Err(bad(&"longer than 10^12 s"));
    }
    Ok(d)
}

/// Formats a duration the way [`parse_duration`] reads it, rounded for people: `250ms`,
/// `1.5s` (to a tenth of a second below two minutes), `2m5s`, `forever`.
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
        assert_eq!(
            parse_duration("2w").unwrap(),
            Duration::from_secs(14 * 86_400)
        );
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        let negative = parse_duration("-5s").unwrap_err().to_string();
        assert!(negative.contains("cannot be negative"), "{negative}");
        for bad in ["", "-1s", "ms", "1.2.3s", "NaNs", "10000000000000"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formats_round_trip_roughly() {
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m5s");
        assert_eq!(format_duration(Duration::MAX), "forever");
        for ms in [0, 250, 1500, 59_940, 125_000] {
            let d = Duration::from_millis(ms);
            let back = parse_duration(&format_duration(d)).unwrap();
            assert!(back.abs_diff(d) <= Duration::from_millis(100), "{ms} ms");
        }
    }
}
