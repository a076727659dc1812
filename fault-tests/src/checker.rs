//! What the log says about safety.

use std::collections::HashMap;
use std::time::Duration;

use crate::store::{Event, Kind};

/// The verdict on one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Writes the store accepted.
    pub ops: u64,
    /// Pairs of holders whose validity windows (acquired .. acquired + validity, cut
    /// at release) overlapped: a mutual-exclusion violation.
    pub overlaps: u64,
    /// Accepted reads or writes carrying a token below one the store had already seen
    /// (only possible without fencing).
    pub stale_accepted: u64,
    /// Reads or writes the fence rejected: the fence doing its job.
    pub fence_rejections: u64,
    /// Accepted writes that did not add exactly one to the value they replaced.
    pub lost_increments: u64,
}

impl Verdict {
    /// No overlap and no stale write accepted.
    #[must_use]
    pub fn safe(&self) -> bool {
        self.overlaps == 0 && self.stale_accepted == 0
    }

    /// [`Verdict::safe`], or, under a fault that no lease can survive (see
    /// [`crate::Nemesis::exclusion_expected`]), no stale write accepted.
    #[must_use]
    pub fn safe_under(&self, nemesis: crate::Nemesis) -> bool {
        if nemesis.exclusion_expected() {
            self.safe()
        } else {
            self.stale_accepted == 0
        }
    }
}

/// Checks a log.
#[must_use]
pub fn check(log: &[Event]) -> Verdict {
    let mut v = Verdict::default();
    // validity windows per (worker, token): acquired .. min(valid_until, release called)
    let mut windows: HashMap<(u32, u64), (Duration, Duration)> = HashMap::new();
    for e in log {
        match e.kind {
            Kind::Acquired => {
                windows.insert((e.worker, e.token), (e.at, Duration::from_nanos(e.n)));
            }
            Kind::Released => {
                if let Some(w) = windows.get_mut(&(e.worker, e.token)) {
                    w.1 = w.1.min(e.at);
                }
            }
            Kind::Read | Kind::Write => {}
        }
    }
    // reads and writes, in the order the store served them (the log's order)
    let mut highest = 0u64;
    let mut value = 0u64;
    for e in log
        .iter()
        .filter(|e| matches!(e.kind, Kind::Read | Kind::Write))
    {
        if !e.accepted {
            v.fence_rejections += 1;
            continue;
        }
        if e.token < highest {
            v.stale_accepted += 1;
        }
        highest = highest.max(e.token);
        if e.kind == Kind::Write {
            v.ops += 1;
            if e.n != value + 1 {
                v.lost_increments += 1;
            }
        }
        value = e.n;
    }
    let mut spans: Vec<(Duration, Duration, u64)> = windows
        .into_iter()
        .map(|((_, t), (a, b))| (a, b, t))
        .collect();
    spans.sort();
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if b.0 >= a.1 {
                break;
            }
            if a.2 != b.2 {
                v.overlaps += 1;
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: u64, worker: u32, kind: Kind, token: u64, n: u64, accepted: bool) -> Event {
        // validity given in ms after acquisition, as nanoseconds of the same clock
        let n = if kind == Kind::Acquired {
            (ms + n) * 1_000_000
        } else {
            n
        };
        Event {
            at: Duration::from_millis(ms),
            worker,
            kind,
            token,
            n,
            accepted,
        }
    }

    #[test]
    fn clean_run_is_safe() {
        let log = vec![
            ev(0, 1, Kind::Acquired, 1, 1000, true),
            ev(1, 1, Kind::Read, 1, 0, true),
            ev(2, 1, Kind::Write, 1, 1, true),
            ev(3, 1, Kind::Released, 1, 0, true),
            ev(4, 2, Kind::Acquired, 2, 1000, true),
            ev(5, 2, Kind::Read, 2, 1, true),
            ev(6, 2, Kind::Write, 2, 2, true),
        ];
        let v = check(&log);
        assert!(v.safe(), "{v:?}");
        assert_eq!((v.ops, v.lost_increments), (2, 0));
    }

    #[test]
    fn finds_overlap_stale_write_and_lost_increment() {
        let log = vec![
            ev(0, 1, Kind::Acquired, 1, 1000, true),
            ev(1, 1, Kind::Read, 1, 0, true),
            ev(500, 2, Kind::Acquired, 2, 1000, true), // inside worker 1's window
            ev(501, 2, Kind::Read, 2, 0, true),
            ev(502, 2, Kind::Write, 2, 1, true),
            ev(2000, 1, Kind::Write, 1, 1, true), // stale, and the increment is lost
        ];
        let v = check(&log);
        assert_eq!(
            (v.overlaps, v.stale_accepted, v.lost_increments),
            (1, 1, 1),
            "{v:?}"
        );
    }
}
