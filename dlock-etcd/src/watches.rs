//! One watch per lock queue and client, shared by every waiter of that queue, with
//! each delete routed to the waiter of the deleted key through core's wake-up hub.
//!
//! A watch created per wait costs a new gRPC stream on every hand-off, and on etcd
//! before 3.6.2 a watch created while another write commits starts *unsynced*: its
//! events wait for the server's catch-up loop, which runs every 100 ms — the whole
//! FIFO queue then stalls behind that one waiter. A queue's watch that stays open
//! across hand-offs pays that race at most once per lifetime, not once per hand-off.
//! It lingers [`LINGER`] after its last waiter leaves, so a client that waits again
//! and again on one lock keeps it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::{OwnedTask, Subscription, WakeupHub};
use etcd_client::{Client, EventType, WatchOptions};
use tokio::sync::watch;

/// How long a queue's watch stays open with no waiter.
const LINGER: Duration = Duration::from_secs(10);

/// The open queue watches of one client.
pub(crate) struct Watches {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    hub: Arc<WakeupHub>,
    queues: Mutex<HashMap<String, QueueWatch>>,
}

/// One queue's watch: how many waiters use it, whether the server has created it, and
/// the keys it saw deleted lately.
struct QueueWatch {
    waiters: usize,
    state: watch::Receiver<State>,
    id: u64,
    recent: RecentDeletes,
    _task: OwnedTask,
}

/// The last [`RECENT`] deletes a queue's watch delivered, and the revision from which
/// on it knows every delete: a waiter that read its predecessor at a revision it
/// covers learns here, without a second read, whether the delete already went by.
#[derive(Default)]
struct RecentDeletes {
    keys: std::collections::VecDeque<(Vec<u8>, i64)>,
    /// 0 until the watch is created.
    covers_from: i64,
}

/// How many deletes a queue's watch remembers.
const RECENT: usize = 256;

impl RecentDeletes {
    fn record(&mut self, key: &[u8], rev: i64) {
        if self.keys.len() == RECENT
            && let Some((_, oldest)) = self.keys.pop_front()
        {
            self.covers_from = self.covers_from.max(oldest + 1);
        }
        self.keys.push_back((key.to_vec(), rev));
    }

    fn deleted_after(&self, key: &[u8], read_at: i64) -> Option<bool> {
        if self.covers_from == 0 || read_at < self.covers_from {
            return None;
        }
        Some(self.keys.iter().any(|(k, rev)| k == key && *rev > read_at))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Creating,
    Created,
    Failed,
}

impl Watches {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                hub: WakeupHub::new(),
                queues: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A subscription woken when `key` (a queue key: its queue is everything up to the
    /// last `/`) is deleted, returned once the queue's watch is in place on the server,
    /// so a read made afterwards that still finds the key cannot miss its delete.
    ///
    /// # Errors
    /// `Unavailable` when the watch cannot be created within `timeout`.
    pub(crate) async fn on_delete(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Deletion, LockError> {
        let queue = key.rfind('/').map_or(key, |i| &key[..=i]).to_owned();
        let (mut state, id) = {
            let mut queues = self.inner.queues();
            let q = queues
                .entry(queue.clone())
                .or_insert_with(|| spawn_watch(&self.inner, &queue));
            q.waiters += 1;
            (q.state.clone(), q.id)
        };
        let (me, q) = (Arc::downgrade(&self.inner), queue.clone());
        let leave = move || {
            if let Some(me) = me.upgrade()
                && let Some(w) = me.queues().get_mut(&q)
                && w.id == id
            {
                w.waiters = w.waiters.saturating_sub(1);
            }
        };
        // joined before the caller reads the key: a delete from now on wakes it
        let (subscription, _) = self.inner.hub.join(key, Some(Box::new(leave)));
        let created = tokio::time::timeout(timeout, state.wait_for(|s| *s != State::Creating));
        match created.await {
            Ok(Ok(s)) if *s == State::Created => Ok(Deletion {
                subscription,
                queue,
                id,
                watches: Arc::clone(&self.inner),
            }),
            _ => Err(LockError::transient(format!(
                "watching the queue {queue} failed"
            ))),
        }
    }
}

/// A waiter's registration for one key's delete.
pub(crate) struct Deletion {
    /// Woken when the key is deleted (or the watch broke).
    pub(crate) subscription: Subscription,
    queue: String,
    id: u64,
    watches: Arc<Inner>,
}

impl Deletion {
    /// Whether `key` was deleted after revision `read_at` — `None` when the watch
    /// cannot tell (it does not cover that revision): then read it again.
    pub(crate) fn deleted_after(&self, key: &[u8], read_at: i64) -> Option<bool> {
        let queues = self.watches.queues();
        let q = queues.get(&self.queue).filter(|q| q.id == self.id)?;
        q.recent.deleted_after(key, read_at)
    }
}

impl Inner {
    fn queues(&self) -> MutexGuard<'_, HashMap<String, QueueWatch>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_queue(&self, queue: &str, id: u64, f: impl FnOnce(&mut QueueWatch)) {
        if let Some(q) = self.queues().get_mut(queue).filter(|q| q.id == id) {
            f(q);
        }
    }

    /// Forgets the queue's watch `id` (if it is still the one registered) — only when
    /// no waiter uses it, unless `broken`.
    fn forget(&self, queue: &str, id: u64, broken: bool) -> bool {
        let mut queues = self.queues();
        match queues.get(queue) {
            Some(q) if q.id == id && (broken || q.waiters == 0) => {
                queues.remove(queue);
                true
            }
            Some(q) if q.id == id => false,
            _ => true,
        }
    }
}

fn spawn_watch(inner: &Arc<Inner>, queue: &str) -> QueueWatch {
    let id = dlock_core::random_u64();
    let (tx, rx) = watch::channel(State::Creating);
    let (me, client, hub, queue) = (
        Arc::downgrade(inner),
        inner.client.clone(),
        Arc::clone(&inner.hub),
        queue.to_owned(),
    );
    let task = OwnedTask::spawn(async move {
        let broken = run_watch(&me, client, &hub, &queue, id, &tx).await;
        let _ = tx.send(State::Failed);
        if broken {
            // deletes may have gone unheard: every waiter looks again (and the next
            // one opens a new watch)
            hub.wake_all();
        }
    });
    QueueWatch {
        waiters: 0,
        state: rx,
        id,
        recent: RecentDeletes::default(),
        _task: task,
    }
}

/// Runs the queue's watch until it breaks (`true`) or idles out (`false`).
async fn run_watch(
    me: &Weak<Inner>,
    mut client: Client,
    hub: &WakeupHub,
    queue: &str,
    id: u64,
    created: &watch::Sender<State>,
) -> bool {
    let forget = |broken: bool| me.upgrade().is_none_or(|m| m.forget(queue, id, broken));
    let options = WatchOptions::new().with_prefix();
    let Ok(mut stream) = client.watch(queue, Some(options)).await else {
        forget(true);
        return true;
    };
    let mut idle_check = tokio::time::interval(LINGER);
    idle_check.tick().await;
    loop {
        tokio::select! {
            msg = stream.message() => match msg {
                Ok(Some(resp)) if !resp.canceled() => {
                    let Some(me) = me.upgrade() else { return false };
                    if resp.created() {
                        // every delete after the revision the watch was created at
                        let from = resp.header().map_or(i64::MAX, |h| h.revision() + 1);
                        me.with_queue(queue, id, |q| q.recent.covers_from = from);
                        let _ = created.send(State::Created);
                    }
                    for e in resp.events() {
                        let Some(kv) = e.kv() else { continue };
                        if e.event_type() == EventType::Delete {
                            me.with_queue(queue, id, |q| q.recent.record(kv.key(), kv.mod_revision()));
                            // everyone waiting on that key: a queue's successor,
                            // and observers of the holder
                            hub.wake_each(&String::from_utf8_lossy(kv.key()));
                        } else if kv.version() > 1 {
                            // a key written again (a proclaimed value, a hand-over):
                            // its observers look again; a successor woken too reads
                            // the queue again, as the delete is not recorded
                            hub.wake_each(&String::from_utf8_lossy(kv.key()));
                        }
                    }
                }
                _ => {
                    forget(true);
                    return true;
                }
            },
            _ = idle_check.tick() => {
                if forget(false) {
                    return false;
                }
            }
        }
    }
}
