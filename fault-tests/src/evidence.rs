//! What an unsafe run leaves behind, so a failure on a machine nobody can log into
//! (CI) carries its own evidence: the overlapping windows with their times around the
//! fault, how far the machine's wall clock moved against its monotonic clock during
//! the run, and the whole log in a file.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use tokio::task::JoinHandle;

use crate::checker::{Window, overlapping, windows};
use crate::store::{Event, Kind};
use crate::workload::Workload;

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC`, in nanoseconds: constant while nobody
/// steps the time of day (NTP slewing moves both clocks alike). The lock services on
/// loopback read this machine's wall clock — PostgreSQL's `clock_timestamp()`,
/// MariaDB's `NOW(6)`, Redis's expiry — while the workers' leases count on the
/// monotonic clock, so a change of this offset during a run is a fault of its own (the
/// clock drills' "server clock stepped"), not the one the run injected.
fn wall_minus_monotonic() -> i64 {
    let ns = |id| {
        clock_gettime(id).map_or(0, |t| {
            t.tv_sec()
                .saturating_mul(1_000_000_000)
                .saturating_add(t.tv_nsec())
        })
    };
    ns(ClockId::CLOCK_REALTIME).saturating_sub(ns(ClockId::CLOCK_MONOTONIC))
}

/// Watches the machine's wall clock against its monotonic clock for a run.
pub struct WallClockWatch {
    low: Arc<AtomicI64>,
    high: Arc<AtomicI64>,
    task: JoinHandle<()>,
}

impl WallClockWatch {
    /// Starts sampling every 10 ms.
    #[must_use]
    pub fn start() -> Self {
        let first = wall_minus_monotonic();
        let low = Arc::new(AtomicI64::new(first));
        let high = Arc::new(AtomicI64::new(first));
        let (l, h) = (Arc::clone(&low), Arc::clone(&high));
        let task = tokio::spawn(async move {
            loop {
                let now = wall_minus_monotonic();
                l.fetch_min(now, Ordering::Relaxed);
                h.fetch_max(now, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Self { low, high, task }
    }

    /// How far the wall clock moved against the monotonic clock since the start
    /// (a few microseconds of sampling noise on a quiet machine).
    #[must_use]
    pub fn stop(self) -> Duration {
        self.task.abort();
        let now = wall_minus_monotonic();
        let low = self.low.load(Ordering::Relaxed).min(now);
        let high = self.high.load(Ordering::Relaxed).max(now);
        Duration::from_nanos(u64::try_from(high.saturating_sub(low)).unwrap_or(0))
    }
}

/// A wall-clock move larger than this during a run is reported as a step.
pub const WALL_CLOCK_STEP: Duration = Duration::from_millis(5);

/// The evidence of an unsafe run: the overlapping pairs (up to ten) with their
/// windows in milliseconds from the fault, each pair's grants and releases, the wall
/// clock's move, and the path of a file holding the whole log.
#[must_use]
pub fn describe(
    log: &[Event],
    workload: Workload,
    fault_at: Duration,
    victim: Option<u32>,
    wall_clock_moved: Duration,
) -> String {
    let ms = |d: Duration| {
        let (a, b) = (d.as_secs_f64(), fault_at.as_secs_f64());
        format!("{:+.1}", (a - b) * 1000.0)
    };
    let shown = |w: &Window| {
        format!(
            "worker {} token {} [{}, {}] ms{}",
            w.worker,
            w.token,
            ms(w.from),
            ms(w.until),
            if w.released { "" } else { " (never released)" }
        )
    };
    let spans = windows(log);
    let pairs = overlapping(&spans, workload);
    let mut out = format!(
        "fault at 0 ms, victim {victim:?}; the wall clock moved {wall_clock_moved:?} against the monotonic clock during the run; {} overlapping pairs",
        pairs.len()
    );
    for (a, b) in pairs.iter().take(10) {
        let _ = write!(out, "\n  {} overlaps {}", shown(a), shown(b));
    }
    match dump(log) {
        Ok(path) => {
            let _ = write!(out, "\n  whole log: {path}");
        }
        Err(e) => {
            let _ = write!(out, "\n  (could not write the log: {e})");
        }
    }
    out
}

/// The log, one event a line with its time in ns, written to a new file in the temp
/// directory; its path.
fn dump(log: &[Event]) -> std::io::Result<String> {
    let path = std::env::temp_dir().join(format!(
        "dlock-faults-unsafe-{:016x}.log",
        dlock_any::random_u64()
    ));
    let mut text = String::new();
    for e in log {
        let kind = match e.kind {
            Kind::Acquired => "ACQ",
            Kind::Read => "READ",
            Kind::Write => "WRITE",
            Kind::Released => "REL",
            Kind::Observed => "OBS",
            Kind::Effect => "EFF",
            Kind::Result => "RES",
        };
        let _ = writeln!(
            text,
            "{} {kind} worker={} token={} n={} accepted={} access={}",
            e.at.as_nanos(),
            e.worker,
            e.token,
            e.n,
            e.accepted,
            e.access
        );
    }
    std::fs::write(&path, text)?;
    Ok(path.display().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn event(ms: u64, worker: u32, kind: Kind, token: u64, n: u64) -> Event {
        Event {
            at: Duration::from_millis(ms),
            worker,
            kind,
            token,
            n,
            accepted: true,
            access: 'l',
        }
    }

    #[test]
    fn an_unsafe_run_names_its_pairs_and_keeps_its_log() {
        let log = vec![
            event(1000, 1, Kind::Acquired, 7, 2_000_000_000),
            event(1500, 2, Kind::Acquired, 8, 2_500_000_000),
        ];
        let text = describe(
            &log,
            Workload::Election,
            Duration::from_millis(1100),
            Some(1),
            Duration::from_millis(40),
        );
        assert!(text.contains("1 overlapping pairs"), "{text}");
        assert!(
            text.contains("worker 1 token 7 [-100.0, +900.0] ms (never released)"),
            "{text}"
        );
        let path = text.rsplit("whole log: ").next().unwrap();
        let kept = std::fs::read_to_string(path).unwrap();
        assert_eq!(kept.lines().count(), 2);
        let _ = std::fs::remove_file(path);
    }

    #[tokio::test]
    async fn a_quiet_clock_does_not_move() {
        let watch = WallClockWatch::start();
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(watch.stop() < WALL_CLOCK_STEP);
    }
}
