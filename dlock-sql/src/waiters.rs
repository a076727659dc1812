//! What a client knows of its own waiting acquisitions, by owner id: their queue
//! entries' heartbeats, the holder's lease as last answered, which holders queued for
//! their lock (their release grants it on), and since when a waiter that does not
//! queue has polled.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How many owners `Waiting::queued_holders` (and names `Waiting::contended`) keeps
/// at most.
const QUEUED_HOLDERS_KEPT: usize = 4096;

/// How many polling waiters `Waiting::polled_for` times at most: every wait that ends
/// removes its own (the core calls `abandon` on an error or a drop), so this bounds
/// only what a bug could leak, well above the waiters a client runs at once.
const POLLERS_KEPT: usize = 65_536;

/// The waiting acquisitions of one `SqlLock`, by owner id.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    entries: Mutex<HashMap<String, Entry>>,
    /// Owners that hold their lock after queueing for it (until they release it).
    queued_holders: Mutex<HashSet<String>>,
    /// Names this client last held after queueing for them, then released: the next
    /// waiting acquisition of such a name joins the queue with its first statement
    /// (one hint each).
    contended: Mutex<HashSet<String>>,
    /// When each waiter of a client that does not queue by default began to poll: past
    /// the bound it joins the queue (see `SqlLock::joins_queue`).
    polling_since: Mutex<HashMap<String, Instant>>,
}

#[derive(Debug, Default)]
struct Entry {
    /// When its queue entry's deadline was last moved on (`None`: not queued yet).
    joined: Option<Instant>,
    /// When the holder's lease ends, by the last answer that told it.
    holder_until: Option<Instant>,
    /// The mark and channel its queue entry carries (how it hears of a grant).
    registered: (i64, String),
    /// Held by its queue transaction in flight, which runs to its end even when the
    /// acquisition is dropped: its leave waits for it, so a join that commits after
    /// the acquisition gave up is still undone.
    serial: Arc<tokio::sync::Mutex<()>>,
}

impl Waiting {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `owner` took its lock on `name` after queueing for it (forgetting it):
    /// its release is likely to find waiters, and this client's next waiting
    /// acquisition of `name` to find the lock held (see [`Waiting::was_contended`]).
    pub(crate) fn took_after_queueing(&self, name: &str, owner: &str) -> bool {
        let queued = self.queued_holders().remove(owner);
        if queued {
            let mut names = self
                .contended
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if names.len() >= QUEUED_HOLDERS_KEPT {
                names.clear();
            }
            names.insert(name.to_owned());
        }
        queued
    }

    /// Whether this client last held `name` after queueing for it (forgetting it): a
    /// waiting acquisition then skips the lock table's statement, which would find the
    /// lock held (granted on, at the release, to the next waiter) and only add a
    /// holder of the name's row lock to every hand-off; its queue transaction takes a
    /// lock it finds free with nobody queued all the same.
    pub(crate) fn was_contended(&self, name: &str) -> bool {
        self.contended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
    }

    /// Whether `owner`, a waiter that polls, has polled for `bound` or longer (its
    /// first call starts the clock).
    pub(crate) fn polled_for(&self, owner: &str, bound: Duration) -> bool {
        let mut since = self
            .polling_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if since.len() >= POLLERS_KEPT && !since.contains_key(owner) {
            since.clear();
        }
        since
            .entry(owner.to_owned())
            .or_insert_with(Instant::now)
            .elapsed()
            >= bound
    }

    /// `owner` waits no more (it holds, or it gave up): its polling clock stops.
    pub(crate) fn stopped_polling(&self, owner: &str) {
        self.polling_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(owner);
    }

    /// `owner` took its lock after queueing for it: a hint for its release (see
    /// [`Waiting::took_after_queueing`]).
    pub(crate) fn holds_after_queueing(&self, owner: &str) {
        let mut holders = self.queued_holders();
        // leases lost or never released would leave their owners here, so it is
        // cleared rather than let grow
        if holders.len() >= QUEUED_HOLDERS_KEPT {
            holders.clear();
        }
        holders.insert(owner.to_owned());
    }

    fn queued_holders(&self) -> MutexGuard<'_, HashSet<String>> {
        self.queued_holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// When `owner`'s entry's deadline was last moved on, if its entry still carries
    /// `listener` (a LISTEN connection that reconnected has a new mark; a waiter that
    /// polled and now listens has a channel): else its entry must be written again.
    pub(crate) fn joined_as(&self, owner: &str, listener: &(i64, String)) -> Option<Instant> {
        self.entries()
            .get(owner)
            .filter(|e| e.registered == *listener)
            .and_then(|e| e.joined)
    }

    pub(crate) fn joined(&self, owner: &str) -> Option<Instant> {
        self.entries().get(owner).and_then(|e| e.joined)
    }

    /// The serial of `owner`'s queue transactions (its entry made if new).
    pub(crate) fn serial(&self, owner: &str) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(&self.entries().entry(owner.to_owned()).or_default().serial)
    }

    /// When the holder's lease ends, by the last answer, if that is still ahead.
    pub(crate) fn holder_left(&self, owner: &str) -> Option<Duration> {
        let until = self.entries().get(owner)?.holder_until?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Records what an answer sent at `sent` said of the holder's lease.
    pub(crate) fn holder_seen(&self, owner: &str, sent: Instant, remaining: Option<Duration>) {
        if let Some(e) = self.entries().get_mut(owner) {
            e.holder_until = remaining.map(|r| sent + r);
        }
    }

    /// Records an answer: still queued (deadline moved on now, the entry carrying
    /// `listener`), or done (`None`).
    pub(crate) fn answered(&self, owner: &str, queued: Option<&(i64, String)>) {
        let mut entries = self.entries();
        match queued {
            None => {
                entries.remove(owner);
            }
            Some(listener) => {
                if let Some(e) = entries.get_mut(owner) {
                    e.joined = Some(Instant::now());
                    e.registered = listener.clone();
                }
            }
        }
    }

    /// Forgets `owner`, returning its serial if it ever ran a queue transaction.
    pub(crate) fn forget(&self, owner: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        self.stopped_polling(owner);
        self.entries().remove(owner).map(|e| e.serial)
    }
}
