//! What the log says about safety.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use crate::own_store::counter::Counter;

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
    /// Grants whose token was not above an earlier grant's: for the mutex and the
    /// election, every earlier grant (by the time the holder got it); for a read-write
    /// lock, the grants a writer must follow or precede; for a semaphore, a token
    /// another grant already had. A fencing token that went backwards or repeated.
    pub tokens_backwards: u64,
    /// Idempotency: distinct request ids called.
    pub requests: u64,
    /// Idempotency: effects beyond the first of a request — in the store (its ledger
    /// rows) or as the runners reported them.
    pub duplicate_effects: u64,
    /// Idempotency: requests whose callers got different results, or a result other
    /// than the effect the store holds.
    pub results_disagreeing: u64,
}

impl Verdict {
    /// No overlap, no stale write accepted, no observer going back in epoch.
    #[must_use]
    pub fn safe(&self) -> bool {
        self.overlaps == 0
            && self.stale_accepted == 0
            && self.observed_backwards == 0
            && self.tokens_backwards == 0
            && self.duplicate_effects == 0
            && self.results_disagreeing == 0
    }

    /// [`Verdict::safe`], or, under a fault that no lease can survive (see
    /// [`crate::Nemesis::exclusion_expected`]), no stale write accepted.
    #[must_use]
    pub fn safe_under(&self, nemesis: crate::Nemesis) -> bool {
        self.safe_if(nemesis.exclusion_expected())
    }

    /// [`Verdict::safe`] when `exclusion_expected`, else no stale write accepted (nor
    /// any other harm a fence or a token order must prevent).
    #[must_use]
    pub fn safe_if(&self, exclusion_expected: bool) -> bool {
        if exclusion_expected {
            self.safe()
        } else {
            self.stale_accepted == 0
                && self.observed_backwards == 0
                && self.tokens_backwards == 0
                && self.duplicate_effects == 0
                && self.results_disagreeing == 0
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
    if workload == Workload::Once {
        // requests are locks of their own: their tokens and windows do not compare
        return check_once(log, &HashMap::new());
    }
    let mut v = Verdict::default();
    let spans = windows(log);
    // mutex and election grants in the order their holders got them: each token above
    // all before; a read-write lock's grants around each writer
    match workload {
        Workload::Mutex | Workload::Election => {
            let mut grants: Vec<&Event> = log.iter().filter(|e| e.kind == Kind::Acquired).collect();
            grants.sort_by_key(|e| e.at);
            let mut highest = None;
            for g in grants {
                if highest.is_some_and(|h| g.token <= h) {
                    v.tokens_backwards += 1;
                }
                highest = highest.max(Some(g.token));
            }
        }
        Workload::ReadWrite => v.tokens_backwards += rw_tokens_backwards(&spans),
        Workload::Semaphore(_) => v.tokens_backwards += repeated_tokens(&spans),
        _ => {}
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
        if workload == Workload::OwnStore {
            // a worker reports its write after the store committed it — perhaps much
            // later, when it was paused in between — so the log's order is not the
            // store's: the store's own history judges (see `check_history`)
            v.ops += u64::from(write);
            continue;
        }
        let stale = match workload {
            // holders overlap by design: an operation is stale when it is served after
            // its own holder's validity window (token order proves nothing here)
            Workload::Semaphore(_) => spans
                .iter()
                .find(|w| w.worker == e.worker && w.token == e.token)
                .is_some_and(|w| e.at > w.until),
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
    v.overlaps = match workload {
        Workload::Semaphore(n) => over_admissions(&spans, n),
        _ => overlapping(&spans, workload).len() as u64,
    };
    v
}

/// One holder's validity window, as the checker judges it: from the moment its worker
/// stamped the grant (after the lock service answered) to the lease's `valid_until` as
/// the worker's lease computed it (from the moment the request was *sent*, minus the
/// drift margin), cut at the worker's stamp of its release (taken before it asked the
/// service to release). Every stamp is the machine's `CLOCK_MONOTONIC`, so windows of
/// different processes compare. A window can only start late and end early against the
/// lock service's own view of the lease, never the other way round: an overlap is two
/// holders that both had the lease by the service's word, or a service whose expiry
/// clock ran ahead of the machine's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The worker that held it.
    pub worker: u32,
    /// Its fencing token.
    pub token: u64,
    /// How it was held (`x`, `p`, `r`, `w`, `l`: see [`Event::access`]).
    pub access: char,
    /// When its worker reported the grant.
    pub from: Duration,
    /// Its end: `valid_until`, or the release stamp if that came first.
    pub until: Duration,
    /// Whether the worker reported its release (a killed holder's window runs out).
    pub released: bool,
}

/// Every holder's validity window in `log`, in the order they began.
#[must_use]
pub fn windows(log: &[Event]) -> Vec<Window> {
    let mut by_grant: HashMap<(u32, u64), Window> = HashMap::new();
    for e in log {
        match e.kind {
            Kind::Acquired => {
                by_grant.insert(
                    (e.worker, e.token),
                    Window {
                        worker: e.worker,
                        token: e.token,
                        access: e.access,
                        from: e.at,
                        until: Duration::from_nanos(e.n),
                        released: false,
                    },
                );
            }
            Kind::Released => {
                if let Some(w) = by_grant.get_mut(&(e.worker, e.token)) {
                    w.until = w.until.min(e.at);
                    w.released = true;
                }
            }
            _ => {}
        }
    }
    let mut spans: Vec<Window> = by_grant.into_values().collect();
    spans.sort_by_key(|w| (w.from, w.until, w.token));
    spans
}

/// The pairs of `spans` (sorted as [`windows`] returns them) that break exclusion
/// under `workload`: grants with different tokens whose windows overlap — for a
/// read-write lock only pairs with a writer in them. (A semaphore's holders overlap by
/// design; see [`Verdict::overlaps`].)
#[must_use]
pub fn overlapping(spans: &[Window], workload: Workload) -> Vec<(Window, Window)> {
    let rw = workload == Workload::ReadWrite;
    let mut pairs = Vec::new();
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if b.from >= a.until {
                break;
            }
            // readers overlap by design
            if a.token != b.token && !(rw && a.access != 'w' && b.access != 'w') {
                pairs.push((*a, *b));
            }
        }
    }
    pairs
}

/// Adds what the backend's own store says to a verdict on the counter it holds:
/// - its history (the tokens of the writes it holds, in order) must rise — a token below
///   an earlier one, or equal to one before the last, is a stale write it accepted;
/// - it must hold every write: one a worker saw accepted that is missing, or a count of
///   writes (where the store keeps one) above the history's length, is a write
///   overwritten by a stale one — an increment lost.
///
/// Writes in the history that no worker reported are fine: a worker killed between its
/// commit and its report, or a reply lost to a fault.
pub fn check_history(v: &mut Verdict, log: &[Event], counter: &Counter) {
    let history = &counter.history;
    let mut highest = 0;
    let mut previous = None;
    for &t in history {
        // the same holder may write twice under one token; an older one may not
        if t < highest || (t == highest && previous != Some(t)) {
            v.stale_accepted += 1;
        }
        highest = highest.max(t);
        previous = Some(t);
    }
    let kept: HashSet<u64> = history.iter().copied().collect();
    let missing = log
        .iter()
        .filter(|e| e.kind == Kind::Write && e.accepted && !kept.contains(&e.token))
        .count() as u64;
    let uncounted = counter
        .writes
        .map_or(0, |w| w.saturating_sub(history.len() as u64));
    v.lost_increments += missing.max(uncounted);
}

/// Checks an idempotency run: the log's effects and results per request number, and
/// `stored`, each request's effects as the store holds them (the tokens of its ledger
/// rows; of its one key on Redis, where a second effect overwrites the first — the
/// runners' reports show it then).
#[must_use]
pub fn check_once(log: &[Event], stored: &HashMap<u64, Vec<u64>>) -> Verdict {
    let mut v = Verdict::default();
    let mut applied: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut results: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for e in log {
        // every request seen counts, whatever became of it
        match e.kind {
            Kind::Effect => {
                let seen = applied.entry(e.n).or_default();
                if !e.accepted {
                    v.fence_rejections += 1;
                } else if e.access == 'n' {
                    seen.insert(e.token);
                }
            }
            Kind::Result if !e.accepted => {
                v.fence_rejections += 1;
                results.entry(e.n).or_default();
            }
            Kind::Result => {
                v.ops += u64::from(e.access == 'R');
                results.entry(e.n).or_default().insert(e.token);
            }
            _ => {}
        }
    }
    let requests: BTreeSet<u64> = applied
        .keys()
        .chain(results.keys())
        .chain(stored.keys())
        .copied()
        .collect();
    v.requests = requests.len() as u64;
    for k in requests {
        let rows = stored.get(&k).map_or(&[][..], Vec::as_slice);
        let mut effects: BTreeSet<u64> = rows.iter().copied().collect();
        effects.extend(applied.get(&k).into_iter().flatten());
        let count = effects.len().max(rows.len()) as u64;
        v.duplicate_effects += count.saturating_sub(1);
        // every caller must have got the one effect the store holds
        let told = results.get(&k).cloned().unwrap_or_default();
        let held: BTreeSet<u64> = rows.iter().copied().collect();
        if told.len() > 1 || (!held.is_empty() && !told.is_subset(&held)) {
            v.results_disagreeing += 1;
        }
    }
    v
}

/// A read-write lock's grants whose order the tokens contradict, among the pairs whose
/// order the log proves: a writer holds alone, so of two grants with a writer in them,
/// the one released before the other was granted was granted first and must carry the
/// lower token. (Only released windows count, and only against grants stamped after
/// the release, however late a starved worker stamped its grant.) Readers share the
/// writers' fencing epoch, so two readers are not ordered.
fn rw_tokens_backwards(spans: &[Window]) -> u64 {
    let mut backwards = 0;
    for h in spans.iter().filter(|w| w.released) {
        for g in spans {
            let writer_in = h.access == 'w' || g.access == 'w';
            if writer_in && g.from > h.until && g.token <= h.token {
                backwards += 1;
            }
        }
    }
    backwards
}

/// A semaphore's grants that repeat an earlier grant's token. Permits are held side by
/// side, so a later stamp does not prove a later grant (a queue backend grants by
/// revision, and a slow holder may notice its turn after a faster one behind it
/// released): only a repeated token, which a fence cannot tell apart, is a defect.
fn repeated_tokens(spans: &[Window]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let repeats = spans.iter().filter(|w| !seen.insert(w.token)).count();
    u64::try_from(repeats).unwrap_or(u64::MAX)
}

/// Grants that began while `n` other windows were still valid.
fn over_admissions(spans: &[Window], n: u32) -> u64 {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut over = 0;
    for (i, s) in spans.iter().enumerate() {
        let others = spans[..i]
            .iter()
            .filter(|o| o.until > s.from && o.token != s.token)
            .count();
        if others >= limit {
            over += 1;
        }
    }
    over
}

#[cfg(test)]
mod tests;
