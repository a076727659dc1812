//! What the flags' values read as, and the checks across flags clap cannot make.

use std::time::Duration;

use super::RunArgs;

pub(super) fn scenario(text: &str) -> Result<dlock_bench::Scenario, String> {
    text.parse()
}

/// `HOST:PORT`, the host a name (`localhost`) or an address (`[::1]:9464` for IPv6);
/// resolved when the run starts, where a name that does not resolve is a warning.
pub(super) fn host_port(text: &str) -> Result<String, String> {
    let port = text
        .rsplit_once(':')
        .map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        Some((host, Ok(_))) if !host.is_empty() => Ok(text.to_owned()),
        _ => Err(format!(
            "{text:?} is not HOST:PORT (e.g. 127.0.0.1:9464, localhost:9464)"
        )),
    }
}

pub(super) fn duration(text: &str) -> Result<Duration, String> {
    dlock_any::parse_duration(text).map_err(|e| match e {
        dlock_any::LockError::InvalidArgument(why) => why,
        other => other.to_string(),
    })
}

/// What is wrong with `--min-hold`, `--max-hold` and `--ttl` together, in the flags'
/// own words (the library checks the same, in its own).
pub fn hold_limits_refused(args: &RunArgs) -> Option<String> {
    let show = dlock_any::format_duration;
    if args.max_hold.is_some_and(|max| max.is_zero()) {
        return Some("--max-hold must be above 0".into());
    }
    let min = args.min_hold?;
    if min > args.ttl {
        return Some(format!(
            "--min-hold ({}) is longer than --ttl ({}): a crash would free the name sooner; \
             raise --ttl",
            show(min),
            show(args.ttl)
        ));
    }
    match args.max_hold {
        Some(max) if min > max => Some(format!(
            "--min-hold ({}) is longer than --max-hold ({})",
            show(min),
            show(max)
        )),
        _ => None,
    }
}
