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
        let (now_empty, untaken) = {
            let mut channels = self.channels();
            let waiters = channels.entry(channel.to_owned()).or_default();
            // A wake-up handed to a waiter that is leaving without taking it (its
            // acquire was dropped, or won by its own retry) belongs to the next one.
            let untaken = waiters
                .iter()
                .find(|(i, _)| *i == id)
                .and_then(|(_, w)| w.upgrade())
                .is_some_and(|n| take_permit(&n));
            waiters.retain(|(i, _)| *i != id);
            (waiters.is_empty(), untaken)
        };
        if untaken {
            self.wake_one(channel);
        }
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

/// Takes a wake-up stored in `notify` (sent while nobody was waiting), if there is one.
fn take_permit(notify: &Notify) -> bool {
    let waiting = notify.notified();
    let mut waiting = std::pin::pin!(waiting);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    waiting.as_mut().poll(&mut cx).is_ready()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A hub on a real connection (`DLOCK_TEST_REDIS_URL`, as `scripts/services` sets it).
    async fn hub() -> Arc<Wakeups> {
        let url = std::env::var("DLOCK_TEST_REDIS_URL")
            .expect("DLOCK_TEST_REDIS_URL (eval \"$(scripts/services up)\")");
        let client = redis::Client::open(format!("{url}?protocol=resp3")).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = redis::aio::ConnectionManagerConfig::new().set_push_sender(tx);
        let conn = client
            .get_connection_manager_with_config(config)
            .await
            .unwrap();
        Wakeups::start(conn, rx)
    }

    #[tokio::test]
    async fn a_wake_up_left_untaken_goes_to_the_next_waiter() {
        let hub = hub().await;
        let channel = format!("dlock-test-wakeups-{:016x}", dlock_core::random_u64());
        let (first, second) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let g1 = hub.subscribe(&channel, &first).await.unwrap();
        let _g2 = hub.subscribe(&channel, &second).await.unwrap();
        hub.wake_one(&channel);
        // the longest waiter is gone before it took its wake-up
        drop(g1);
        assert!(
            take_permit(&second),
            "the wake-up died with the waiter that left"
        );
        assert!(!take_permit(&first), "passed on, not duplicated");
    }

    #[tokio::test]
    async fn a_taken_wake_up_is_not_passed_on() {
        let hub = hub().await;
        let channel = format!("dlock-test-wakeups-{:016x}", dlock_core::random_u64());
        let (first, second) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let g1 = hub.subscribe(&channel, &first).await.unwrap();
        let _g2 = hub.subscribe(&channel, &second).await.unwrap();
        hub.wake_one(&channel);
        assert!(take_permit(&first));
        drop(g1);
        assert!(!take_permit(&second), "no spurious wake-up");
    }
}
