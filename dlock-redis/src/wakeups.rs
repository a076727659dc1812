//! Release notifications over RESP3 push on the node's one connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use redis::aio::ConnectionManager;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

/// The waiters of each channel, oldest first.
type Waiters = HashMap<String, Vec<(u64, Weak<Notify>)>>;

/// Subscriptions of one node, shared by all waiters of a client: a channel is
/// subscribed while at least one waiter wants it, and a message wakes the waiter that
/// has waited longest on that channel (one per release, no herd).
pub(crate) struct Wakeups {
    conn: ConnectionManager,
    channels: Mutex<Waiters>,
    /// Serialises SUBSCRIBE/UNSUBSCRIBE so a late unsubscribe cannot undo a new
    /// subscribe of the same channel.
    ops: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Wakeups {
    pub(crate) fn start(
        conn: ConnectionManager,
        mut pushes: UnboundedReceiver<PushInfo>,
    ) -> Arc<Self> {
        let me = Arc::new(Self {
            conn,
            channels: Mutex::new(HashMap::new()),
            ops: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(0),
            task: Mutex::new(None),
        });
        let weak = Arc::downgrade(&me);
        let task = tokio::spawn(async move {
            while let Some(push) = pushes.recv().await {
                let Some(me) = weak.upgrade() else { return };
                match push.kind {
                    PushKind::Message => {
                        if let Some(Value::BulkString(ch)) = push.data.first() {
                            me.wake_one(&String::from_utf8_lossy(ch));
                        }
                    }
                    // Messages may have been lost while reconnecting: everyone looks again.
                    PushKind::Disconnection => me.wake_all(),
                    _ => {}
                }
            }
        });
        *me.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        me
    }

    /// Registers `notify` for `channel`, subscribing on the server if it is the first.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        channel: &str,
        notify: &Arc<Notify>,
    ) -> redis::RedisResult<SubscriptionGuard> {
        let _serial = self.ops.lock().await;
        let first = self
            .channels()
            .get(channel)
            .is_none_or(|waiters| waiters.is_empty());
        if first {
            self.conn.clone().subscribe(channel).await?;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.channels()
            .entry(channel.to_owned())
            .or_default()
            .push((id, Arc::downgrade(notify)));
        Ok(SubscriptionGuard {
            hub: Arc::clone(self),
            channel: channel.to_owned(),
            id,
        })
    }

    fn channels(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_one(&self, channel: &str) {
        if let Some(n) = self
            .channels()
            .get(channel)
            .and_then(|ws| ws.iter().find_map(|(_, w)| w.upgrade()))
        {
            n.notify_one();
        }
    }

    fn wake_all(&self) {
        for ws in self.channels().values() {
            for n in ws.iter().filter_map(|(_, w)| w.upgrade()) {
                n.notify_one();
            }
        }
    }

    fn leave(self: &Arc<Self>, channel: &str, id: u64) {
        let now_empty = {
            let mut channels = self.channels();
            let waiters = channels.entry(channel.to_owned()).or_default();
            waiters.retain(|(i, _)| *i != id);
            waiters.is_empty()
        };
        if now_empty && let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (me, channel) = (Arc::clone(self), channel.to_owned());
            rt.spawn(async move {
                let _serial = me.ops.lock().await;
                let still_empty = me.channels().get(&channel).is_none_or(Vec::is_empty);
                if still_empty {
                    me.channels().remove(&channel);
                    let _ = me.conn.clone().unsubscribe(&channel).await;
                }
            });
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        if let Some(t) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            t.abort();
        }
    }
}

/// Keeps one waiter registered; unsubscribes the channel when the last one goes.
pub(crate) struct SubscriptionGuard {
    hub: Arc<Wakeups>,
    channel: String,
    id: u64,
}

impl Drop for SubscriptionGuard {
    fn drop(&mut self) {
        self.hub.leave(&self.channel, self.id);
    }
}
