//! One renewal timetable per tokio runtime. Every guard started on a runtime is an
//! entry in its timetable, ordered by when it is due, and one task starts the renewals
//! of the entries that come due: a held lock costs an entry in a map, not a task and a
//! timer of its own (100 000 held locks were 100 000 sleeping tasks).
//!
//! The renewals that come due go to a ready queue that at most [`WORKERS`] tasks drain,
//! one renewal after another: a renewal in flight costs its future (≈ 0.8 KiB through
//! the layers), and 100 000 of them in flight at once were the process's peak, which the
//! allocator keeps. A renewal that waited a sixth of its TTL in the queue (the workers
//! stuck on a dead backend's retries, say) gets a task of its own at once, so one
//! backend's outage never delays another's renewals past that.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::{Handle, Id};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Shared;
use super::watchdog::{next_due, renew_when_due};
use crate::DistributedLock;

/// A guard's place in the timetable: when it is due, and a tie-breaker.
pub(super) type Slot = (Instant, u64);

/// The most tasks that drain the ready queue at once: at least what a batching backend
/// puts in one request (Redis 256 renewals per script call, ZooKeeper 512 per
/// multi-read, SQL 1 000 per statement, etcd 4 096 keys per lease read), so batches fill, and few enough that their futures
/// are a small part of what 100 000 held locks cost.
const WORKERS: usize = 4096;

/// When a renewal due `now` stops waiting in the ready queue for a worker and gets a
/// task of its own: after a sixth of its TTL (so its first attempt still starts before
/// 7/12 of the lease), and at once when the hold's cap has come (the renewal then only
/// marks the guard `Expired`, which must not wait behind busy workers).
fn give_up_at(entry: &Entry, now: Instant) -> Instant {
    let waited = now + entry.ttl / 6;
    entry.shared.cap().map_or(waited, |cap| waited.min(cap))
}

/// What the timetable keeps per guard.
struct Entry {
    lock: Arc<dyn DistributedLock>,
    shared: Arc<Shared>,
    grid: bool,
    /// The lease's TTL, kept so that scheduling reads no lease under the table's lock.
    ttl: Duration,
}

#[derive(Default)]
struct Table {
    due: BTreeMap<Slot, Entry>,
    /// Due entries not yet started, by when each stops waiting (the most urgent first,
    /// whatever their TTLs).
    ready: BTreeMap<Slot, Entry>,
    /// Tasks draining `ready`, at most [`WORKERS`].
    workers: usize,
    next_id: u64,
    /// When the task looks next (`None`: when an entry is added). An entry due before
    /// it wakes the task; one due at or after it does not.
    wake_at: Option<Instant>,
}

/// A runtime's timetable, shared by its guards and its renewal task.
pub(super) struct Renewals {
    table: Mutex<Table>,
    changed: Notify,
    /// Cleared when the task ends (its runtime shut down): guards started later on a
    /// runtime with the same id get a new timetable.
    alive: AtomicBool,
}

impl Renewals {
    /// The current runtime's timetable, started with its task on first use.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(super) fn current() -> Arc<Self> {
        let handle = Handle::current();
        let id = handle.id();
        let cached = CACHE.with(|c| {
            c.borrow()
                .as_ref()
                .filter(|(of, _)| *of == id)
                .and_then(|(_, r)| r.upgrade())
                .filter(|r| r.alive.load(Ordering::Acquire))
        });
        if let Some(r) = cached {
            return r;
        }
        let r = registered(&handle, id);
        CACHE.with(|c| *c.borrow_mut() = Some((id, Arc::downgrade(&r))));
        r
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a guard, due for its next renewal. Nothing is added for a guard whose hold
    /// is over (released while its renewal was in flight).
    pub(super) fn add(&self, lock: Arc<dyn DistributedLock>, shared: Arc<Shared>, grid: bool) {
        let ttl = shared.lease().ttl();
        self.insert(Entry {
            lock,
            shared,
            grid,
            ttl,
        });
    }

    fn insert(&self, entry: Entry) {
        let due = next_due(&entry.shared, entry.grid);
        let mut table = self.table();
        // read under the table's lock: `forget` runs after the state became final, so
        // either it finds this entry or this sees the final state
        if entry.shared.state().is_final() {
            return;
        }
        let slot = (due, table.next_id);
        table.next_id += 1;
        *entry.shared.slot() = Some(slot);
        table.due.insert(slot, entry);
        let earlier = table.wake_at.is_none_or(|w| due < w);
        if earlier {
            table.wake_at = Some(due);
        }
        drop(table);
        if earlier {
            self.changed.notify_one();
        }
    }

    /// Removes a guard whose hold is over (its state already final), from the table or
    /// the ready queue (both keyed from one counter). A renewal of it in flight ends on
    /// the state change.
    pub(super) fn forget(&self, shared: &Shared) {
        let mut table = self.table();
        if let Some(slot) = shared.slot().take()
            && table.due.remove(&slot).is_none()
        {
            table.ready.remove(&slot);
        }
    }

    /// Moves the entries due by `now` to the ready queue. Returns how many workers to
    /// start (counted as started), the entries that waited too long for one (each to get
    /// a task of its own), and when to look next; records the latter.
    fn schedule(&self, now: Instant) -> (usize, Vec<Entry>, Option<Instant>) {
        let mut table = self.table();
        while let Some(first) = table.due.first_entry() {
            if first.key().0 > now {
                break;
            }
            let entry = first.remove();
            let give_up = (give_up_at(&entry, now), table.next_id);
            table.next_id += 1;
            *entry.shared.slot() = Some(give_up);
            table.ready.insert(give_up, entry);
        }
        let mut impatient = Vec::new();
        while let Some(first) = table.ready.first_entry() {
            if first.key().0 > now {
                break;
            }
            let entry = first.remove();
            *entry.shared.slot() = None;
            impatient.push(entry);
        }
        let start = WORKERS.saturating_sub(table.workers).min(table.ready.len());
        table.workers += start;
        let next_due = table.due.first_key_value().map(|(slot, _)| slot.0);
        let next_give_up = table.ready.first_key_value().map(|(give_up, _)| give_up.0);
        table.wake_at = match (next_due, next_give_up) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (start, impatient, table.wake_at)
    }

    /// The next ready entry for a worker; `None` ends the worker (counted out under the
    /// same lock, so an entry queued later finds the worker gone and starts another).
    fn next_ready(&self) -> Option<Entry> {
        let mut table = self.table();
        let next = table.ready.pop_first().map(|(_, entry)| entry);
        match &next {
            Some(entry) => *entry.shared.slot() = None,
            None => table.workers -= 1,
        }
        next
    }

    /// Renews `entry` when due and puts it back in the timetable if its hold goes on.
    async fn renew(&self, entry: Entry) {
        if renew_when_due(&*entry.lock, &entry.shared).await {
            self.insert(entry);
        }
    }
}

/// The runtime's renewal task: sleeps until the first entry is due (or a ready one
/// has waited too long), and starts the workers that renew the due entries, each on a
/// task of its own (so renewals spread over the runtime's workers, as a batching
/// backend's answers come back, and one slow answer holds up only its worker); a
/// renewed entry goes back in the table for its next renewal.
async fn run(renewals: Arc<Renewals>) {
    // one timer for the task, moved to each next instant to look
    let mut sleep = pin!(tokio::time::sleep(Duration::ZERO));
    let mut armed: Option<Instant> = None;
    loop {
        let (start, impatient, wake_at) = renewals.schedule(Instant::now());
        if start > 0 || !impatient.is_empty() {
            // held shut until every task is spawned, then opened at once: the renewals
            // due together reach a batching backend together (one request), not the
            // first few ahead of the rest as each task starts
            let gate = Arc::new(tokio::sync::RwLock::new(()));
            let shut = Arc::clone(&gate).write_owned().await;
            for _ in 0..start {
                let (renewals, gate) = (Arc::clone(&renewals), Arc::clone(&gate));
                tokio::spawn(async move {
                    let mut worker = Worker {
                        renewals,
                        counted_out: false,
                    };
                    drop(gate.read().await);
                    while let Some(entry) = worker.renewals.next_ready() {
                        worker.renewals.renew(entry).await;
                    }
                    worker.counted_out = true;
                });
            }
            for entry in impatient {
                let (renewals, gate) = (Arc::clone(&renewals), Arc::clone(&gate));
                tokio::spawn(async move {
                    drop(gate.read().await);
                    renewals.renew(entry).await;
                });
            }
            drop(shut);
        }
        if wake_at != armed {
            if let Some(at) = wake_at {
                sleep.as_mut().reset(at);
            }
            armed = wake_at;
        }
        let changed = renewals.changed.notified();
        tokio::select! {
            () = &mut sleep, if armed.is_some() => armed = None,
            () = changed => {}
        }
    }
}

/// A worker task's place in the count: given back by `next_ready` when the queue is
/// empty, or here when the task ends otherwise (a driver's renewal panicked, the runtime
/// shut down), so a lost worker never leaves the queue with fewer than it counts.
struct Worker {
    renewals: Arc<Renewals>,
    counted_out: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.counted_out {
            let mut table = self.renewals.table();
            table.workers = table.workers.saturating_sub(1);
        }
    }
}

thread_local! {
    /// The timetable this thread last used, by runtime: no global lock per guard.
    static CACHE: RefCell<Option<(Id, Weak<Renewals>)>> = const { RefCell::new(None) };
}

/// Every runtime's timetable, for threads that have not cached theirs.
static REGISTRY: Mutex<Vec<(Id, Weak<Renewals>)>> = Mutex::new(Vec::new());

/// The timetable of runtime `id`, started on `handle` if it has none alive.
fn registered(handle: &Handle, id: Id) -> Arc<Renewals> {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    registry.retain(|(_, r)| r.upgrade().is_some_and(|r| r.alive.load(Ordering::Acquire)));
    if let Some(r) = registry
        .iter()
        .find(|(of, _)| *of == id)
        .and_then(|(_, r)| r.upgrade())
    {
        return r;
    }
    let renewals = Arc::new(Renewals {
        table: Mutex::new(Table::default()),
        changed: Notify::new(),
        alive: AtomicBool::new(true),
    });
    // moved into the task, so it runs when the task is dropped even unpolled
    let end = EndOfRuntime(Arc::clone(&renewals));
    handle.spawn(async move {
        let end = end;
        run(Arc::clone(&end.0)).await;
    });
    registry.push((id, Arc::downgrade(&renewals)));
    renewals
}

/// Marks the timetable dead when its task is dropped (the runtime shut down) and lets
/// go of its entries: their locks' connections went with the runtime.
struct EndOfRuntime(Arc<Renewals>);

impl Drop for EndOfRuntime {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
        let mut table = self.0.table();
        let entries = (
            std::mem::take(&mut table.due),
            std::mem::take(&mut table.ready),
        );
        drop(table);
        drop(entries);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use super::Renewals;
    use crate::{Locker, MemoryLock};

    #[tokio::test]
    async fn released_and_dropped_guards_leave_the_timetable() {
        let locker = Locker::new(Arc::new(MemoryLock::new())).with_ttl(Duration::from_secs(30));
        let renewals = Renewals::current();
        let mut guards = Vec::new();
        for i in 0..100 {
            guards.push(locker.lock(format!("timetable/leave-{i}")).await.unwrap());
        }
        assert_eq!(renewals.table().due.len(), 100);
        let dropped = guards.split_off(50);
        drop(dropped);
        for g in guards {
            assert!(g.release().await.unwrap());
        }
        let table = renewals.table();
        assert!(
            table.due.is_empty() && table.ready.is_empty(),
            "entries left behind"
        );
    }
}
