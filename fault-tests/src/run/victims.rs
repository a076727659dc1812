//! Which worker a fault strikes, and when: read from the store's log as it grows.

use std::time::Duration;

use tokio::time::sleep;

use super::Plan;
use crate::store::{Event, FencedStore, Kind};
use crate::workload::Workload;

/// Each worker's latest step in the store's log.
pub(super) fn last_steps(store: &FencedStore) -> std::collections::BTreeMap<u32, (Kind, bool)> {
    let mut last = std::collections::BTreeMap::new();
    // an observer's report, or a caller's result, says nothing about its worker's hold
    for e in store
        .log()
        .into_iter()
        .filter(|e| !matches!(e.kind, Kind::Observed | Kind::Result))
    {
        last.insert(e.worker, (e.kind, e.accepted));
    }
    last
}

/// A worker that holds the lock now (acquired or working under it, not released), per
/// the store's log; with several holders (a semaphore, readers), the first.
pub(super) fn holder(store: &FencedStore) -> Option<u32> {
    last_steps(store)
        .into_iter()
        .find(|(_, (k, _))| *k != Kind::Released)
        .map(|(w, _)| w)
}

/// A worker waiting for the lock while another holds it: its last step a release at
/// least 5 ms ago (it is back in `acquire`, queued by now where the backend queues), or
/// no step at all — one of the `workers` started before the warm-up that has not got
/// the lock once (a barging lock's polling waiter can lose every race for seconds).
pub(super) fn waiter(store: &FencedStore, workers: u32) -> Option<u32> {
    waiter_in(&store.log(), store.now(), holder(store)?, workers)
}

/// [`waiter`] over a log read at `now`, `holder` holding.
fn waiter_in(log: &[Event], now: Duration, holder: u32, workers: u32) -> Option<u32> {
    // when each worker's wait began; none while it holds
    let mut waiting_since: std::collections::BTreeMap<u32, Option<Duration>> =
        (0..workers).map(|w| (w, Some(Duration::ZERO))).collect();
    for e in log
        .iter()
        .filter(|e| !matches!(e.kind, Kind::Observed | Kind::Result))
    {
        waiting_since.insert(e.worker, (e.kind == Kind::Released).then_some(e.at));
    }
    waiting_since.into_iter().find_map(|(w, since)| {
        let queued = since.is_some_and(|at| now.saturating_sub(at) > Duration::from_millis(5));
        (w != holder && queued).then_some(w)
    })
}

/// Whether worker `w` has read the counter and not yet written or released.
pub(super) fn reading(store: &FencedStore, w: u32) -> bool {
    last_steps(store)
        .get(&w)
        .is_some_and(|(k, accepted)| *k == Kind::Read && *accepted)
}

/// A read-write lock's writer that has read the counter and not yet written, with the
/// token it holds.
pub(super) fn writer_mid_update(store: &FencedStore) -> Option<(u32, u64)> {
    // each worker's latest step, and the access of its latest grant
    let mut last = std::collections::BTreeMap::new();
    for e in store
        .log()
        .into_iter()
        .filter(|e| !matches!(e.kind, Kind::Observed | Kind::Result))
    {
        let access = match last.get(&e.worker) {
            _ if e.kind == Kind::Acquired => e.access,
            Some(&(_, _, access, _)) => access,
            None => 'x',
        };
        last.insert(e.worker, (e.kind, e.accepted, access, e.token));
    }
    last.into_iter()
        .find(|(_, (k, accepted, access, _))| *k == Kind::Read && *accepted && *access == 'w')
        .map(|(w, (_, _, _, token))| (w, token))
}

/// Whether a reader has read the counter, accepted, under a token above `token` after
/// `since`.
pub(super) fn read_above(store: &FencedStore, token: u64, since: Duration) -> bool {
    let mut access = std::collections::BTreeMap::new();
    for e in store.log() {
        if e.kind == Kind::Acquired {
            access.insert(e.worker, e.access);
        } else if e.kind == Kind::Read
            && e.accepted
            && e.at > since
            && e.token > token
            && access.get(&e.worker) == Some(&'r')
        {
            return true;
        }
    }
    false
}

/// Whether a write under a token above `token` was accepted after `since`: a writer
/// that raised the fence, so a stale write refused afterwards says nothing about the
/// readers'.
pub(super) fn write_above(store: &FencedStore, token: u64, since: Duration) -> bool {
    store
        .log()
        .iter()
        .any(|e| e.kind == Kind::Write && e.accepted && e.at > since && e.token > token)
}

/// Whether the paused writer `victim`'s stale write was refused by a fence only a
/// later reader had raised: its first write after the fault refused; before it, a
/// reader's read accepted above its token, and nothing of a later writer's (its read
/// raises the fence too, its write surely does).
pub(super) fn refused_by_reader_alone(log: &[Event], fault_at: Duration, victim: u32) -> bool {
    let Some(token) = log
        .iter()
        .rev()
        .find(|e| e.worker == victim && e.kind == Kind::Acquired && e.at <= fault_at)
        .map(|e| e.token)
    else {
        return false;
    };
    let Some(stale) = log
        .iter()
        .find(|e| e.worker == victim && e.kind == Kind::Write && e.at > fault_at)
    else {
        return false;
    };
    let (mut access, mut read, mut written) = (std::collections::BTreeMap::new(), false, false);
    for e in log.iter().filter(|e| e.at < stale.at) {
        if e.kind == Kind::Acquired {
            access.insert(e.worker, e.access);
        } else if e.accepted && e.token > token && matches!(e.kind, Kind::Read | Kind::Write) {
            match access.get(&e.worker) {
                Some('r') => read = true,
                _ => written = true,
            }
        }
    }
    !stale.accepted && read && !written
}

/// A worker that has read the counter and not yet written: the moment to pause it.
pub(super) fn mid_update(store: &FencedStore) -> Option<u32> {
    last_steps(store)
        .into_iter()
        .find(|(_, (k, accepted))| *k == Kind::Read && *accepted)
        .map(|(w, _)| w)
}

/// The worker a holder fault strikes: a holder — for idempotency, a runner mid-work
/// (between its look and its effect), where a fault matters to exactly-once.
pub(super) fn victim(plan: &Plan, store: &FencedStore) -> Option<u32> {
    match plan.workload {
        Workload::Once => mid_update(store),
        _ => holder(store),
    }
}

pub(super) async fn wait_for<T>(
    mut probe: impl FnMut() -> Option<T>,
    within: Duration,
) -> Option<T> {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if let Some(w) = probe() {
            return Some(w);
        }
        sleep(Duration::from_millis(1)).await;
    }
    None
}

/// Idempotency: from the fault to the first result of the request its victim was
/// working on (another runner finished it, or found it finished); none when the victim
/// had not reached its work's hold (its request is not in the log yet).
pub(super) fn takeover(log: &[Event], fault_at: Duration, victim: Option<u32>) -> Option<Duration> {
    let last = log.iter().rev().find(|e| {
        matches!(e.kind, Kind::Read | Kind::Acquired)
            && Some(e.worker) == victim
            && e.at <= fault_at
    })?;
    let k = (last.kind == Kind::Read).then_some(last.n)?;
    log.iter()
        .find(|e| e.kind == Kind::Result && e.accepted && e.n == k && e.at > fault_at)
        .map(|e| e.at - fault_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: u64, worker: u32, kind: Kind, token: u64, accepted: bool, access: char) -> Event {
        Event {
            at: Duration::from_millis(ms),
            worker,
            kind,
            token,
            n: 0,
            accepted,
            access,
        }
    }

    /// Writer 0 (token 5) paused at 10 ms after its read; reader 1 (token 7) reads at
    /// 20 ms; the writer's stale write at 30 ms is refused.
    fn paused_writer_then_reader() -> Vec<Event> {
        vec![
            ev(1, 0, Kind::Acquired, 5, true, 'w'),
            ev(2, 0, Kind::Read, 5, true, ' '),
            ev(15, 1, Kind::Acquired, 7, true, 'r'),
            ev(20, 1, Kind::Read, 7, true, ' '),
        ]
    }

    /// Worker 0 holds; worker 1 released 2 ms before the look, too recently to be
    /// back in `acquire`; worker 2 never got the lock (a barging lock's polling waiter
    /// that lost every race since it started): it is the waiter.
    #[test]
    fn a_worker_that_never_held_is_waiting() {
        let log = vec![
            ev(10, 1, Kind::Acquired, 1, true, 'x'),
            ev(30, 1, Kind::Released, 1, true, ' '),
            ev(31, 0, Kind::Acquired, 2, true, 'x'),
        ];
        let now = Duration::from_millis(32);
        assert_eq!(waiter_in(&log, now, 0, 3), Some(2));
        // with two workers only, nobody has waited long enough yet
        assert_eq!(waiter_in(&log, now, 0, 2), None);
        // later, worker 1 is back in `acquire`
        assert_eq!(waiter_in(&log, Duration::from_millis(40), 0, 2), Some(1));
    }

    #[test]
    fn the_reader_alone_refused_the_stale_write() {
        let mut log = paused_writer_then_reader();
        log.push(ev(30, 0, Kind::Write, 5, false, ' '));
        assert!(refused_by_reader_alone(&log, Duration::from_millis(10), 0));
    }

    #[test]
    fn a_later_writer_first_or_an_accepted_write_is_not_the_reader_alone() {
        let fault = Duration::from_millis(10);
        // accepted: the fence did not hold
        let mut log = paused_writer_then_reader();
        log.push(ev(30, 0, Kind::Write, 5, true, ' '));
        assert!(!refused_by_reader_alone(&log, fault, 0));
        // a later writer read above the token before the stale write: it raised the
        // fence too
        let mut log = paused_writer_then_reader();
        log.push(ev(22, 2, Kind::Acquired, 9, true, 'w'));
        log.push(ev(24, 2, Kind::Read, 9, true, ' '));
        log.push(ev(30, 0, Kind::Write, 5, false, ' '));
        assert!(!refused_by_reader_alone(&log, fault, 0));
        // no reader read above it: nothing to credit the reader with
        let mut log = vec![
            ev(1, 0, Kind::Acquired, 5, true, 'w'),
            ev(2, 0, Kind::Read, 5, true, ' '),
        ];
        log.push(ev(30, 0, Kind::Write, 5, false, ' '));
        assert!(!refused_by_reader_alone(&log, fault, 0));
    }
}
