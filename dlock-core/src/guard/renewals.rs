//! One renewal timetable per tokio runtime. Every guard started on a runtime is an
//! entry in its timetable, ordered by when it is due, and one task starts the renewals
//! of the entries that come due: a held lock costs an entry in a map, not a task and a
//! timer of its own (100 000 held locks were 100 000 sleeping tasks). Only a renewal in
//! flight has a task, for as long as it is in flight.

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

/// What the timetable keeps per guard.
struct Entry {
    lock: Arc<dyn DistributedLock>,
    shared: Arc<Shared>,
    grid: bool,
}

#[derive(Default)]
struct Table {
    due: BTreeMap<Slot, Entry>,
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
        self.insert(Entry { lock, shared, grid });
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

    /// Removes a guard whose hold is over (its state already final). A renewal of it in
    /// flight ends on the state change.
    pub(super) fn forget(&self, shared: &Shared) {
        let mut table = self.table();
        if let Some(slot) = shared.slot().take() {
            table.due.remove(&slot);
        }
    }

    /// The entries due by `now`, out of the table; records when to look next.
    fn take_due(&self, now: Instant) -> (Vec<Entry>, Option<Instant>) {
        let mut table = self.table();
        let mut due = Vec::new();
        while let Some(first) = table.due.first_entry() {
            if first.key().0 > now {
                break;
            }
            let entry = first.remove();
            *entry.shared.slot() = None;
            due.push(entry);
        }
        table.wake_at = table.due.first_key_value().map(|(slot, _)| slot.0);
        (due, table.wake_at)
    }
}

/// The runtime's renewal task: sleeps until the first entry is due, and starts the
/// renewal of every entry that is, each on a task of its own for as long as it is in
/// flight (so renewals spread over the runtime's workers, as a batching backend's
/// answers come back, and one slow answer holds up no other); a renewed entry goes
/// back in the table for its next renewal.
async fn run(renewals: Arc<Renewals>) {
    // one timer for the task, moved to each next due instant
    let mut sleep = pin!(tokio::time::sleep(Duration::ZERO));
    let mut armed: Option<Instant> = None;
    loop {
        let (due, wake_at) = renewals.take_due(Instant::now());
        if !due.is_empty() {
            // held shut until every task is spawned, then opened at once: the renewals
            // due together reach a batching backend together (one request), not the
            // first few ahead of the rest as each task starts
            let gate = Arc::new(tokio::sync::RwLock::new(()));
            let shut = Arc::clone(&gate).write_owned().await;
            for entry in due {
                let (renewals, gate) = (Arc::clone(&renewals), Arc::clone(&gate));
                tokio::spawn(async move {
                    drop(gate.read().await);
                    if renew_when_due(&*entry.lock, &entry.shared).await {
                        renewals.insert(entry);
                    }
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
        let entries = std::mem::take(&mut self.0.table().due);
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
        assert!(renewals.table().due.is_empty(), "entries left behind");
    }
}
