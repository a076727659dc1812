//! The plain key layout has no queue: a release publishes on the name's channel and
//! every waiter listening there tries again. A client that releases and asks again at
//! once would reach the server first nearly every time — a waiter woken by the release
//! passes through a push, a task or two and a round trip before its attempt arrives —
//! and could keep it out indefinitely (rule 9 of `DistributedLock`; the conformance
//! case `a_busy_client_does_not_starve_a_waiter` failed on the plain layout once in a
//! CI run, its waiter left out for 3 s). So a release whose message reached a listener
//! makes this client's next attempt on the name wait a moment first: the woken waiter
//! gets there before it. A release nobody listened to costs nothing. The head start is
//! short (1 ms) while waiters use it, and doubles (up to 5 ms) each time none did — a
//! fixed 5 ms cut the layout's contended throughput to a third (`BENCHMARKS.md`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

/// The first head start: a woken waiter's push, task hand-overs and round trip take
/// about 0.1–0.3 ms on an idle machine.
const FIRST: Duration = Duration::from_millis(1);
/// The longest: many wake-ups' worth on a loaded machine.
const LONGEST: Duration = Duration::from_millis(5);
/// Names whose doubled head start is remembered, at most (then forgotten at once).
const REMEMBERED: usize = 1024;

/// The names this client released to listeners, until when it stays back, and the
/// names whose last head start no waiter used.
#[derive(Default)]
pub(crate) struct Courtesy {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Head starts under way: until when, and how long each is.
    pending: HashMap<String, (Instant, Duration)>,
    /// The next head start of a name whose last one went unused: twice that one's.
    longer: HashMap<String, Duration>,
}

impl Courtesy {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A release of `key` was heard by at least one listener.
    pub(crate) fn released_to_listeners(&self, key: &str) {
        let now = Instant::now();
        let mut state = self.state();
        // names not asked for again since: their head start is over
        state.pending.retain(|_, (t, _)| *t > now);
        let length = state.longer.get(key).copied().unwrap_or(FIRST);
        state.pending.insert(key.to_owned(), (now + length, length));
    }

    /// Waits out the head start given on `key`, if one is under way; how long it was.
    ///
    /// # Cancel safety
    /// Cancel safe: it only sleeps (a dropped wait gives up that head start).
    pub(crate) async fn stay_back(&self, key: &str) -> Option<Duration> {
        let (until, length) = self.state().pending.remove(key)?;
        sleep_until(until).await;
        Some(length)
    }

    /// What the attempt after a head start of `length` on `key` found: the lock still
    /// free (`taken`: no waiter came in its head start, so the next one is twice as
    /// long, up to [`LONGEST`]) or taken by a waiter (the first length again).
    pub(crate) fn after_head_start(&self, key: &str, length: Duration, taken: bool) {
        let mut state = self.state();
        if !taken {
            state.longer.remove(key);
            return;
        }
        if state.longer.len() >= REMEMBERED {
            state.longer.clear();
        }
        state
            .longer
            .insert(key.to_owned(), (length * 2).min(LONGEST));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unused_head_start_doubles_up_to_the_longest_and_a_used_one_resets() {
        let c = Courtesy::default();
        assert_eq!(c.stay_back("k").await, None, "nothing released: no wait");
        let mut lengths = Vec::new();
        for _ in 0..5 {
            c.released_to_listeners("k");
            let length = c.stay_back("k").await.expect("a head start");
            lengths.push(length.as_millis());
            c.after_head_start("k", length, true);
        }
        assert_eq!(lengths, [1, 2, 4, 5, 5]);
        c.released_to_listeners("k");
        let length = c.stay_back("k").await.expect("a head start");
        c.after_head_start("k", length, false);
        c.released_to_listeners("k");
        assert_eq!(c.stay_back("k").await, Some(FIRST));
    }
}
