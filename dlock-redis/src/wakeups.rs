//! Release notifications over RESP3 push on the node's one connection, fanned out by
//! core's wake-up hub: a channel is subscribed on the server while at least one waiter
//! wants it, and a message wakes the waiter that has waited longest (no herd).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::conn::Conn;
use dlock_core::backend::grants::GrantSlots;
use dlock_core::backend::{OwnedTask, Subscription, WakeupHub};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::UnboundedReceiver;

/// The subscriptions of one node, shared by all waiters of a client.
pub(crate) struct Wakeups {
    conn: Conn,
    hub: Arc<WakeupHub>,
    /// The grants releases sent to this client's queued waiters (`dlock_core::backend::grants`).
    pub(crate) grants: Arc<GrantSlots>,
    /// Serialises SUBSCRIBE/UNSUBSCRIBE so a late unsubscribe cannot undo a new
    /// subscribe of the same channel.
    ops: tokio::sync::Mutex<()>,
    /// Channels to subscribe again after a dropped cluster connection.
    resubscribing: Mutex<BTreeSet<String>>,
    /// Whether a task is subscribing `resubscribing` again.
    retrying: AtomicBool,
    _listener: OwnedTask,
}

impl Wakeups {
    pub(crate) fn start(conn: Conn, mut pushes: UnboundedReceiver<PushInfo>) -> Arc<Self> {
        let hub = WakeupHub::new();
        let grants = Arc::new(GrantSlots::default());
        Arc::new_cyclic(|me: &Weak<Self>| {
            let me = me.clone();
            let fan_out = Arc::clone(&hub);
            let mailbox = Arc::clone(&grants);
            let listener = OwnedTask::spawn(async move {
                let hub = fan_out;
                while let Some(push) = pushes.recv().await {
                    match push.kind {
                        // A cluster ends the sharded subscriptions of a slot that moved
                        // to another master: its waiters look again, and it is
                        // subscribed again (on the slot's new master) while anyone
                        // waits. Our own SUNSUBSCRIBE is answered the same way, for an
                        // idle channel.
                        PushKind::SUnsubscribe => {
                            if let Some(Value::BulkString(ch)) = push.data.first() {
                                let ch = String::from_utf8_lossy(ch).into_owned();
                                if !hub.is_idle(&ch) {
                                    hub.wake_each(&ch);
                                    resubscribe(&me, vec![ch]);
                                }
                            }
                        }
                        // SMessage: sharded pub/sub, on a cluster. A grant carries the
                        // token (a waiter's own channel), a release message `released`
                        PushKind::Message | PushKind::SMessage => {
                            if let Some(Value::BulkString(ch)) = push.data.first() {
                                let ch = String::from_utf8_lossy(ch);
                                if let Some(token) = push.data.get(1).and_then(granted_token) {
                                    mailbox.deliver(&ch, token);
                                }
                                hub.wake_one(&ch);
                            }
                        }
                        // Messages may have been lost while reconnecting: everyone looks
                        // again. Behind Sentinel the server it reconnects to is checked
                        // first. On a cluster the node that dropped may be a master
                        // failing over, and the client only reconnects to its old
                        // address: every channel with waiters is subscribed again,
                        // which routes it by the slot map as it is now.
                        PushKind::Disconnection => {
                            mailbox.forget_grants();
                            if let Some(w) = me.upgrade() {
                                w.conn.connection_dropped();
                                if w.conn.is_cluster() {
                                    resubscribe(&me, hub.busy_channels());
                                }
                            }
                            hub.wake_all();
                        }
                        _ => {}
                    }
                }
            });
            Self {
                conn,
                hub,
                grants,
                ops: tokio::sync::Mutex::new(()),
                resubscribing: Mutex::new(BTreeSet::new()),
                retrying: AtomicBool::new(false),
                _listener: listener,
            }
        })
    }

    /// Registers a waiter on `channel`, subscribing on the server if it is the first.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        channel: &str,
    ) -> redis::RedisResult<Subscription> {
        let _serial = self.ops.lock().await;
        let (me, ch) = (Arc::downgrade(self), channel.to_owned());
        let on_leave = move || unsubscribe_if_idle(&me, ch);
        let (subscription, first) = self.hub.join(channel, Some(Box::new(on_leave)));
        if first {
            self.conn.subscribe(channel).await?;
        }
        Ok(subscription)
    }
}

impl Wakeups {
    /// Registers a queued waiter on its own `channel` (no other waiter shares it, so
    /// no other subscribe or unsubscribe of it can race this one: it does not wait for
    /// the others'); its grant slot is closed when it leaves.
    pub(crate) async fn subscribe_own(
        self: &Arc<Self>,
        channel: &str,
    ) -> redis::RedisResult<Subscription> {
        let (me, ch) = (Arc::downgrade(self), channel.to_owned());
        let on_leave = move || {
            if let Some(w) = me.upgrade() {
                w.grants.close(&ch);
            }
            unsubscribe_if_idle(&me, ch);
        };
        let (subscription, _) = self.hub.join(channel, Some(Box::new(on_leave)));
        self.conn.subscribe(channel).await?;
        Ok(subscription)
    }
}

/// Subscribes `channels` again, in the background, each only while it still has
/// waiters. A failure (the slot's new master not promoted or not known yet) is tried
/// again, at most half a second apart, until the channel is subscribed or idle. A
/// release published before the subscription was back reached no one, so the channel's
/// waiters look again once it is.
///
/// One task at a time does this for a node's subscriptions (channels a later drop adds
/// join its set), and it takes the lock that orders subscribes for one channel and one
/// bounded try at a time, so waiters subscribing meanwhile are not held up behind a
/// master that is gone.
fn resubscribe(me: &Weak<Wakeups>, channels: Vec<String>) {
    let Some(w) = me.upgrade() else { return };
    if channels.is_empty() {
        return;
    }
    lock(&w.resubscribing).extend(channels);
    if w.retrying.swap(true, Ordering::SeqCst) {
        return; // the running task takes them
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        w.retrying.store(false, Ordering::SeqCst);
        return;
    };
    let me = me.clone();
    rt.spawn(async move {
        let mut pause = Duration::ZERO;
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).clamp(RESUBSCRIBE_FIRST_RETRY, RESUBSCRIBE_LAST_RETRY);
            let Some(w) = me.upgrade() else { return };
            let batch = std::mem::take(&mut *lock(&w.resubscribing));
            let mut failed = Vec::new();
            for ch in batch {
                let _serial = w.ops.lock().await;
                if w.hub.is_idle(&ch) {
                    continue;
                }
                match tokio::time::timeout(RESUBSCRIBE_TRY, w.conn.subscribe(&ch)).await {
                    Ok(Ok(())) => w.hub.wake_each(&ch),
                    _ => failed.push(ch),
                }
            }
            let mut pending = lock(&w.resubscribing);
            pending.extend(failed);
            if pending.is_empty() {
                // under the set's lock: a channel added after this starts a new task
                w.retrying.store(false, Ordering::SeqCst);
                return;
            }
        }
    });
}

/// The token of a grant message (a release's `released` is none).
fn granted_token(payload: &Value) -> Option<u64> {
    match payload {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// The first pause before a failed resubscription is tried again.
const RESUBSCRIBE_FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest pause between tries of a failed resubscription.
const RESUBSCRIBE_LAST_RETRY: Duration = Duration::from_millis(500);
/// How long one try of a resubscription may take (redis-rs retries inside it).
const RESUBSCRIBE_TRY: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Unsubscribes `channel` once no waiter wants it (checked again under the lock that
/// orders subscribes, so a waiter that arrived meanwhile keeps it).
fn unsubscribe_if_idle(me: &Weak<Wakeups>, channel: String) {
    let Some(me) = me.upgrade() else { return };
    if !me.hub.is_idle(&channel) {
        return;
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let _serial = me.ops.lock().await;
            if me.hub.is_idle(&channel) {
                let _ = me.conn.unsubscribe(&channel).await;
            }
        });
    }
}
