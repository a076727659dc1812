//! This process's own resource use, from `/proc` (Linux): what a figure cost the
//! client.

use std::time::Duration;

/// Resident set size, from /proc/self/statm (pages × 4 KiB).
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// CPU time this process has run, every thread's: the sum of
/// `/proc/self/task/*/schedstat` (nanoseconds, so a few thousand cycles of a fraction
/// of a millisecond each measure precisely), or user + system time from
/// `/proc/self/stat` (10 ms ticks) where schedstat is missing. Threads that exited
/// are not counted: tokio's workers live as long as the runtime.
pub(crate) fn cpu_time() -> Duration {
    schedstat().unwrap_or_else(stat_ticks)
}

fn schedstat() -> Option<Duration> {
    let mut total = 0_u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path().join("schedstat");
        let text = std::fs::read_to_string(path).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

fn stat_ticks() -> Duration {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(Duration::from_millis(ticks * 10))
        })
        .unwrap_or_default()
}
