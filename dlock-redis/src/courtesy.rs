//! The plain key layout has no queue: a release publishes on the name's channel and
//! every waiter listening there tries again. A client that releases and asks again at
//! once would reach the server first nearly every time — a waiter woken by the release
//! passes through a push, a task or two and a round trip before its attempt arrives —
//! and could keep it out indefinitely (rule 9 of `DistributedLock`; the conformance
//! case `a_busy_client_does_not_starve_a_waiter` failed on the plain layout once in a
//! CI run, its waiter left out for 3 s). So a release whose message reached a listener
//! makes this client's next attempt on the name wait a moment first: the woken waiter
//! gets there before it. A release nobody listened to costs nothing.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

/// How long the releasing client stays back: many wake-ups' worth on a loaded machine.
const HEAD_START: Duration = Duration::from_millis(5);

/// The names this client released to listeners, and until when it stays back.
#[derive(Default)]
pub(crate) struct Courtesy {
    until: Mutex<HashMap<String, Instant>>,
}

impl Courtesy {
    fn until(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A release of `key` was heard by at least one listener.
    pub(crate) fn released_to_listeners(&self, key: &str) {
        let now = Instant::now();
        let mut until = self.until();
        // names not asked for again since: their head start is over
        until.retain(|_, t| *t > now);
        until.insert(key.to_owned(), now + HEAD_START);
    }

    /// Waits out the head start given on `key`, if one is under way.
    ///
    /// # Cancel safety
    /// Cancel safe: it only sleeps.
    pub(crate) async fn stay_back(&self, key: &str) {
        let Some(t) = self.until().remove(key) else {
            return;
        };
        sleep_until(t).await;
    }
}
