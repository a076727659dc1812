//! What the log says about safety.

use std::collections::HashMap;
use std::time::Duration;

use crate::store::{Event, Kind};
use crate::workload::{Fence, Workload};

/// The verdict on one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Writes the store accepted.
    pub ops: u64,
    /// Exclusion violations among validity windows (acquired .. acquired + validity,
    /// cut at release): for the mutex, pairs of windows that overlapped; for a
    /// semaphore of N, grants that began while N others were valid (over-admissions);
    /// for a read-write lock, pairs with a writer in them that overlapped.
    pub overlaps: u64,
    /// Accepted reads or writes that were stale: for the mutex and the read-write lock,
    /// those the workload's [`Fence`] finds stale (a newer grant had already been seen);
    /// for a semaphore, those served after their holder's validity window ended.
    pub stale_accepted: u64,
    /// Reads or writes the fence rejected: the fence doing its job.
    pub fence_rejections: u64,
    /// Accepted writes that did not add exactly one to the value they replaced.
    pub lost_increments: u64,
    /// Leader changes the workers' election observers reported.
    pub observed: u64,
    /// Observer reports whose epoch was below the same observer's previous one.
    pub observed_backwards: u64,
}

impl Verdict {
    /// No overlap, no stale write accepted, no observer going back in epoch.
    #[must_use]
    pub fn safe(&self) -> bool {
        self.overlaps == 0 && self.stale_accepted == 0 && self.observed_backwards == 0
    }

    /// [`Verdict::safe`], or, under a fault that no lease can survive (see
    /// [`crate::Nemesis::exclusion_expected`]), no stale write accepted.
    #[must_use]
    pub fn safe_under(&self, nemesis: crate::Nemesis) -> bool {
        if nemesis.exclusion_expected() {
            self.safe()
        } else {
            self.stale_accepted == 0 && self.observed_backwards == 0
        }
    }
}

/// Checks a mutex run's log.
#[must_use]
pub fn check(log: &[Event]) -> Verdict {
    check_as(log, Workload::Mutex)
}

/// Checks a log of `workload`.
#[must_use]
pub fn check_as(log: &[Event], workload: Workload) -> Verdict {
    let mut v = Verdict::default();
    // validity windows per (worker, token): acquired .. min(valid_until, release called)
    let mut windows: HashMap<(u32, u64), (Duration, Duration, char)> = HashMap::new();
    for e in log {
        match e.kind {
            Kind::Acquired => {
                let until = Duration::from_nanos(e.n);
                windows.insert((e.worker, e.token), (e.at, until, e.access));
            }
            Kind::Released => {
                if let Some(w) = windows.get_mut(&(e.worker, e.token)) {
                    w.1 = w.1.min(e.at);
                }
            }
            Kind::Read | Kind::Write | Kind::Observed => {}
        }
    }
    // every observer's epochs, in the order it reported them
    let mut last_seen: HashMap<u32, u64> = HashMap::new();
    for e in log.iter().filter(|e| e.kind == Kind::Observed) {
        v.observed += 1;
        if last_seen
            .insert(e.worker, e.token)
            .is_some_and(|prev| e.token < prev)
        {
            v.observed_backwards += 1;
        }
    }
    // reads and writes, in the order the store served them (the log's order)
    let mut fence = Fence::new(workload);
    let mut value = 0u64;
    for e in log
        .iter()
        .filter(|e| matches!(e.kind, Kind::Read | Kind::Write))
    {
        if !e.accepted {
            v.fence_rejections += 1;
            continue;
        }
        let write = e.kind == Kind::Write;
        let stale = match workload {
            // holders overlap by design: an operation is stale when it is served after
            // its own holder's validity window (token order proves nothing here)
            Workload::Semaphore(_) => windows
                .get(&(e.worker, e.token))
                .is_some_and(|w| e.at > w.1),
            _ => !fence.admits(e.token, write),
        };
        if stale {
            v.stale_accepted += 1;
        }
        fence.record(e.token, write);
        if write {
            v.ops += 1;
            if e.n != value + 1 {
                v.lost_increments += 1;
            }
        }
        value = e.n;
    }
    let mut spans: Vec<(Duration, Duration, u64, char)> = windows
        .into_iter()
        .map(|((_, t), (a, b, access))| (a, b, t, access))
        .collect();
    spans.sort_by_key(|s| (s.0, s.1, s.2));
    v.overlaps = match workload {
        Workload::Semaphore(n) => over_admissions(&spans, n),
        _ => {
            let rw = workload == Workload::ReadWrite;
            let mut pairs = 0;
            for (i, a) in spans.iter().enumerate() {
                for b in &spans[i + 1..] {
                    if b.0 >= a.1 {
                        break;
                    }
                    // readers overlap by design
                    if a.2 != b.2 && !(rw && a.3 != 'w' && b.3 != 'w') {
                        pairs += 1;
                    }
                }
            }
            pairs
        }
    };
    v
}

/// Grants that began while `n` other windows were still valid.
fn over_admissions(spans: &[(Duration, Duration, u64, char)], n: u32) -> u64 {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut over = 0;
    for (i, s) in spans.iter().enumerate() {
        let others = spans[..i]
            .iter()
            .filter(|o| o.1 > s.0 && o.2 != s.2)
            .count();
        if others >= limit {
            over += 1;
        }
    }
    over
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
            access: 'x',
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

    #[test]
    fn an_observer_going_back_in_epoch_is_unsafe() {
        let obs = |ms, w, epoch| ev(ms, w, Kind::Observed, epoch, 0, true);
        // the same leader again (after a vacancy) is not going back
        let forward = vec![
            obs(0, 1, 3),
            obs(1, 2, 3),
            obs(2, 1, 5),
            obs(3, 2, 5),
            obs(4, 2, 5),
        ];
        let v = check_as(&forward, Workload::Election);
        assert_eq!((v.observed, v.observed_backwards), (5, 0));
        assert!(v.safe());
        let back = vec![obs(0, 1, 5), obs(1, 1, 3)];
        let v = check_as(&back, Workload::Election);
        assert_eq!(v.observed_backwards, 1);
        assert!(!v.safe());
    }

    #[test]
    fn semaphores_count_over_admissions_and_rw_ignores_readers_together() {
        let acq = |ms, w, t, access| Event {
            access,
            ..ev(ms, w, Kind::Acquired, t, 1000, true)
        };
        let three = vec![acq(0, 1, 1, 'p'), acq(1, 2, 2, 'p'), acq(2, 3, 3, 'p')];
        assert_eq!(check_as(&three, Workload::Semaphore(3)).overlaps, 0);
        assert_eq!(check_as(&three, Workload::Semaphore(2)).overlaps, 1);
        let readers = vec![acq(0, 1, 1, 'r'), acq(1, 2, 2, 'r')];
        assert_eq!(check_as(&readers, Workload::ReadWrite).overlaps, 0);
        let mixed = vec![acq(0, 1, 1, 'r'), acq(1, 2, 2, 'w')];
        assert_eq!(check_as(&mixed, Workload::ReadWrite).overlaps, 1);
    }
}
