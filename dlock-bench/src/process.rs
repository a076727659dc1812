//! This process's own resource use, from `/proc` (Linux): what a figure cost the
//! client.

use std::collections::HashMap;
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

/// The CPU time each of this process's threads has run so far, from
/// `/proc/self/task/*/schedstat` (nanoseconds, so a few thousand cycles of a fraction
/// of a millisecond each measure precisely). [`CpuClock::elapsed`] sums, per thread,
/// what ran since: a thread that exited meanwhile (tokio's idle blocking threads do)
/// drops out without taking its earlier time with it, and one that started counts
/// whole. Where schedstat is missing, user + system time from `/proc/self/stat` (10 ms
/// ticks) for the whole process stands in.
pub(crate) struct CpuClock {
    threads: HashMap<String, u64>,
    ticks: Duration,
}

impl CpuClock {
    /// The threads' CPU times now.
    pub(crate) fn now() -> Self {
        Self {
            threads: threads(),
            ticks: stat_ticks(),
        }
    }

    /// The CPU time this process's threads ran since [`CpuClock::now`].
    pub(crate) fn elapsed(&self) -> Duration {
        let now = threads();
        if now.is_empty() {
            return stat_ticks().saturating_sub(self.ticks);
        }
        let ns: u64 = now
            .iter()
            .map(|(tid, t)| t.saturating_sub(self.threads.get(tid).copied().unwrap_or(0)))
            .sum();
        Duration::from_nanos(ns)
    }
}

/// Each live thread's run time in ns, by thread id (a thread that vanishes while they
/// are read is left out).
fn threads() -> HashMap<String, u64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return HashMap::new();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            let ns = text.split_whitespace().next()?.parse::<u64>().ok()?;
            Some((task.file_name().to_string_lossy().into_owned(), ns))
        })
        .collect()
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
