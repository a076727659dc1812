//! Release notifications handed to waiters: one wake-up per release, to the waiter that
//! has waited longest, and never lost to a waiter that leaves without taking it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::Notify;

use super::Subscription;

/// The waiters of each channel (a lock name, or the key a release publishes on),
/// oldest first.
type Waiters = HashMap<String, Vec<(u64, Weak<Notify>)>>;

/// The waiters of one client, by channel. An adapter feeds it what its server pushes
/// — [`WakeupHub::wake_one`] for a release, [`WakeupHub::wake_all`] after the
/// notification stream was interrupted (anything may have been missed) — and hands
/// each waiter a [`Subscription`] from [`WakeupHub::join`].
///
/// A wake-up is a permit: one sent while its waiter is between two attempts is kept
/// for it, and one left untaken by a waiter that leaves goes to the next waiter.
///
/// ```
/// use dlock_core::backend::WakeupHub;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let hub = WakeupHub::new();
/// let (first, _) = hub.join("orders/1", None);
/// let (second, _) = hub.join("orders/1", None);
/// hub.wake_one("orders/1"); // the oldest waiter is woken, not both
/// first.notified().await;
/// drop((first, second));
/// assert!(hub.is_idle("orders/1"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct WakeupHub {
    channels: Mutex<Waiters>,
    next_id: AtomicU64,
}

impl WakeupHub {
    /// An empty hub.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Registers a waiter on `channel`; `true` when it is the first one there (the
    /// adapter subscribes on the server then). `on_leave` runs when the waiter's
    /// subscription is dropped, after the hub has forgotten it (the adapter can look
    /// whether the channel is idle and unsubscribe).
    pub fn join(
        self: &Arc<Self>,
        channel: &str,
        on_leave: Option<Box<dyn FnOnce() + Send + Sync>>,
    ) -> (Subscription, bool) {
        let notify = Arc::new(Notify::new());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let first = {
            let mut channels = self.channels();
            let waiters = channels.entry(channel.to_owned()).or_default();
            waiters.push((id, Arc::downgrade(&notify)));
            waiters.len() == 1
        };
        let membership = Membership {
            hub: Arc::clone(self),
            channel: channel.to_owned(),
            id,
            on_leave,
        };
        (Subscription::new(notify, Some(Box::new(membership))), first)
    }

    /// Wakes the longest-waiting waiter of `channel` (a release).
    pub fn wake_one(&self, channel: &str) {
        if let Some(n) = self
            .channels()
            .get(channel)
            .and_then(|ws| ws.iter().find_map(|(_, w)| w.upgrade()))
        {
            n.notify_one();
        }
    }

    /// Wakes every waiter of `channel` (an event each of them waits for, not a
    /// release only one can take: a key deleted that several waiters watch).
    pub fn wake_each(&self, channel: &str) {
        if let Some(ws) = self.channels().get(channel) {
            for n in ws.iter().filter_map(|(_, w)| w.upgrade()) {
                n.notify_one();
            }
        }
    }

    /// Wakes every waiter of every channel, so each looks again (the notification
    /// stream was interrupted, and what it missed is unknown).
    pub fn wake_all(&self) {
        for ws in self.channels().values() {
            for n in ws.iter().filter_map(|(_, w)| w.upgrade()) {
                n.notify_one();
            }
        }
    }

    /// The channels that have waiters now (an adapter subscribes them again after its
    /// notification connection was replaced).
    #[must_use]
    pub fn busy_channels(&self) -> Vec<String> {
        self.channels()
            .iter()
            .filter(|(_, ws)| ws.iter().any(|(_, w)| w.strong_count() > 0))
            .map(|(ch, _)| ch.clone())
            .collect()
    }

    /// Whether `channel` has no waiter left.
    #[must_use]
    pub fn is_idle(&self, channel: &str) -> bool {
        self.channels().get(channel).is_none_or(Vec::is_empty)
    }

    fn channels(&self) -> MutexGuard<'_, Waiters> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn leave(&self, channel: &str, id: u64) {
        let untaken = {
            let mut channels = self.channels();
            let Some(waiters) = channels.get_mut(channel) else {
                return;
            };
            // A wake-up handed to a waiter that is leaving without taking it (its
            // acquire was dropped, or won by its own retry) belongs to the next one.
            let untaken = waiters
                .iter()
                .find(|(i, _)| *i == id)
                .and_then(|(_, w)| w.upgrade())
                .is_some_and(|n| take_permit(&n));
            waiters.retain(|(i, _)| *i != id);
            if waiters.is_empty() {
                channels.remove(channel);
            }
            untaken
        };
        if untaken {
            self.wake_one(channel);
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

/// One waiter's place in the hub; leaving it is dropping it.
struct Membership {
    hub: Arc<WakeupHub>,
    channel: String,
    id: u64,
    on_leave: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.hub.leave(&self.channel, self.id);
        if let Some(f) = self.on_leave.take() {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_permit(s: &Subscription) -> bool {
        let waiting = s.notified();
        let mut waiting = std::pin::pin!(waiting);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        waiting.as_mut().poll(&mut cx).is_ready()
    }

    #[test]
    fn a_wake_up_left_untaken_goes_to_the_next_waiter() {
        let hub = WakeupHub::new();
        let (first, is_first) = hub.join("c", None);
        let (second, _) = hub.join("c", None);
        assert!(is_first);
        hub.wake_one("c");
        // the longest waiter is gone before it took its wake-up
        drop(first);
        assert!(
            has_permit(&second),
            "the wake-up died with the waiter that left"
        );
    }

    #[test]
    fn a_taken_wake_up_is_not_passed_on() {
        let hub = WakeupHub::new();
        let (first, _) = hub.join("c", None);
        let (second, _) = hub.join("c", None);
        hub.wake_one("c");
        assert!(has_permit(&first));
        drop(first);
        assert!(!has_permit(&second), "no spurious wake-up");
    }

    #[test]
    fn wake_all_reaches_every_channel_and_leave_runs_its_hook() {
        let hub = WakeupHub::new();
        let left = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&left);
        let (a, _) = hub.join(
            "a",
            Some(Box::new(move || flag.store(true, Ordering::SeqCst))),
        );
        let (b, _) = hub.join("b", None);
        hub.wake_all();
        assert!(has_permit(&a) && has_permit(&b));
        drop(a);
        assert!(left.load(Ordering::SeqCst) && hub.is_idle("a") && !hub.is_idle("b"));
    }

    /// `wake_each` wakes every waiter of the channel, not just the oldest; other
    /// channels' waiters sleep on.
    #[tokio::test]
    async fn wake_each_wakes_every_waiter_of_the_channel() {
        let hub = WakeupHub::new();
        let (a, _) = hub.join("k", None);
        let (b, _) = hub.join("k", None);
        let (other, _) = hub.join("other", None);
        hub.wake_each("k");
        let soon = std::time::Duration::from_millis(500);
        tokio::time::timeout(soon, a.notified())
            .await
            .expect("a woken");
        tokio::time::timeout(soon, b.notified())
            .await
            .expect("b woken");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), other.notified())
                .await
                .is_err(),
            "another channel's waiter is not woken"
        );
    }
}
