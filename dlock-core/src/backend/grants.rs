//! The waiting side of a grant — for backends whose release hands the lock to the
//! oldest waiter and tells that waiter alone (Redis's queue scripts, PostgreSQL's queue
//! functions): a slot per queued acquisition that keeps the grant message a release
//! sent it, and what makes that message safe to take as the lock without asking the
//! server again.
//!
//! A message is taken only when (1) its token is above the counter the waiter's last
//! "queued" answer carried — tokens grow with every grant, so that grant came after the
//! server ran that attempt, which the waiter sent at a known moment: the lease counts
//! from there (the trait's rule 5); an older grant, lost to an expiry since, has a token at or
//! below it and is ignored — and (2) that attempt was sent recently enough that the
//! lease has most of its TTL left; otherwise the waiter's next attempt confirms the
//! grant on the server (it finds its own owner id there and refreshes the TTL).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::FencingToken;
use crate::backend::Claim;
use tokio::time::Instant;

/// How much of its TTL a grant must still have, counted from the attempt it is dated
/// by, to be taken from the message alone (else the waiter's next attempt confirms it
/// on the server, refreshing its TTL): two thirds.
#[must_use]
pub fn fresh_for(ttl: Duration) -> Duration {
    ttl * 2 / 3
}

/// What a waiter keeps of a grant message once an attempt sent at `sent` was answered
/// "queued" with the server's counter at `counter`: the message (its token, when it
/// arrived) only if it arrived after that attempt went out and its token is above
/// `counter` — else it came before, and is not this waiter's now. The rule
/// [`GrantSlots::answered`] applies, on any clock (a model checks it on integers).
#[must_use]
pub fn kept_after_queued<T: Ord>(
    granted: Option<(u64, T)>,
    sent: &T,
    counter: u64,
) -> Option<(u64, T)> {
    granted.filter(|(t, arrived)| *t > counter && arrived >= sent)
}

/// Whether a waiter takes its grant message as the lock, and from when its lease
/// counts: its last "queued" answer (`queued`: when that attempt was sent, the counter
/// it carried), the message's token (`granted`), and `fresh` — whether that attempt is
/// recent enough that the lease has most of its TTL left. The token must be above the
/// counter; the lease counts from the attempt's sending. The rule
/// [`GrantSlots::take`] applies, on any clock (a model checks it on integers).
#[must_use]
pub fn taken_grant<T: Copy>(
    queued: Option<(T, u64)>,
    granted: Option<u64>,
    fresh: impl FnOnce(T) -> bool,
) -> Option<(u64, T)> {
    let (since, counter) = queued?;
    let token = granted.filter(|&t| t > counter)?;
    fresh(since).then_some((token, since))
}

/// An attempt's answer: the claim, and with a "held" answer the counter the server
/// had then (the floor for a later grant's token).
#[derive(Debug)]
pub struct Answer {
    /// What the attempt got.
    pub claim: Claim,
    /// The token counter the server had when it ran the attempt.
    pub counter: u64,
}

impl Answer {
    /// The lock was taken with `token`.
    #[must_use]
    pub fn taken(token: FencingToken) -> Self {
        Self {
            claim: Claim::Taken(token),
            counter: 0,
        }
    }

    /// Held by another (the holder's `remaining` time, if known); queued while the
    /// server's counter was `counter`.
    #[must_use]
    pub fn held(remaining: Option<Duration>, counter: u64) -> Self {
        Self {
            claim: Claim::Held(remaining),
            counter,
        }
    }
}

/// The queued acquisitions of one client, by a key of the backend's choosing (Redis:
/// the grant channel; SQL: the owner id).
#[derive(Debug, Default)]
pub struct GrantSlots {
    slots: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    /// When the last attempt answered "queued" was sent, and the counter it carried.
    queued: Option<(Instant, u64)>,
    /// The highest token a grant message brought, and when it arrived.
    granted: Option<(u64, Instant)>,
    /// When messages may have been lost (the connection dropped), unless an attempt
    /// sent after that was answered since.
    lost: Option<Instant>,
}

impl GrantSlots {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the slot of a waiter once the server will tell it of a grant (Redis: its
    /// subscription to its channel is confirmed; PostgreSQL: its LISTEN connection is
    /// up). Messages for a key with no open slot are dropped.
    pub fn open(&self, key: &str) {
        self.slots().entry(key.to_owned()).or_default();
    }

    /// Whether the slot of `key` is open (until [`close`](Self::close)).
    pub fn is_open(&self, key: &str) -> bool {
        self.slots().contains_key(key)
    }

    /// Closes it (the waiter stopped waiting), forgetting what it kept.
    pub fn close(&self, key: &str) {
        self.slots().remove(key);
    }

    /// Whether a grant message is kept for `key` (one [`take`](Self::take) would not
    /// take: the waiter's next attempt then confirms it on the server).
    pub fn pending(&self, key: &str) -> bool {
        self.slots().get(key).is_some_and(|s| s.granted.is_some())
    }

    /// Whether the waiter of `key` has nothing to ask the server: it was answered
    /// "queued", no message was lost since, and none is kept — its grant will come as a
    /// message. (Its next attempt may still be due for other reasons: a heartbeat, or
    /// the holder's lease running out.)
    pub fn quiet(&self, key: &str) -> bool {
        self.slots()
            .get(key)
            .is_some_and(|s| s.queued.is_some() && s.lost.is_none() && s.granted.is_none())
    }

    /// A grant message: `token` for `key`. Kept only for an open slot.
    pub fn deliver(&self, key: &str, token: u64) {
        if let Some(slot) = self.slots().get_mut(key)
            && slot.granted.is_none_or(|(t, _)| t < token)
        {
            slot.granted = Some((token, Instant::now()));
        }
    }

    /// The connection dropped: a message may have been lost, and what arrived before
    /// is not trusted (the next attempt asks the server).
    pub fn forget_grants(&self) {
        let now = Instant::now();
        for slot in self.slots().values_mut() {
            slot.granted = None;
            slot.lost = Some(now);
        }
    }

    /// Records an attempt's answer: `sent` is when it went out.
    pub fn answered(&self, key: &str, sent: Instant, answer: &Answer) {
        if !matches!(answer.claim, Claim::Held(_)) {
            return;
        }
        if let Some(slot) = self.slots().get_mut(key) {
            slot.queued = Some((sent, answer.counter));
            // an attempt sent before the loss may have been answered before a grant
            // that was then lost: only a later one clears it
            if slot.lost.is_some_and(|at| sent > at) {
                slot.lost = None;
            }
            // a grant that arrived before this attempt went out, or whose token is not
            // above what the server had when it ran it, came before: not ours now
            slot.granted = kept_after_queued(slot.granted, &sent, answer.counter);
        }
    }

    /// The grant a release sent this waiter, as a claim, when it may be taken without
    /// asking the server: its token is above the last "queued" answer's counter, and
    /// that attempt went out less than `fresh_for` ago.
    pub fn take(&self, key: &str, fresh_for: Duration) -> Option<Claim> {
        let mut slots = self.slots();
        let slot = slots.get_mut(key)?;
        let granted = slot.granted.map(|(t, _)| t);
        let (token, since) =
            taken_grant(slot.queued, granted, |since| since.elapsed() < fresh_for)?;
        slot.granted = None;
        Some(Claim::Granted {
            token: FencingToken::new(token),
            since,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CH: &str = "{a}:released:owner";
    const FRESH: Duration = Duration::from_secs(10);

    fn queued(slots: &GrantSlots, counter: u64) -> Instant {
        let sent = Instant::now();
        slots.answered(CH, sent, &Answer::held(None, counter));
        sent
    }

    #[test]
    fn a_grant_above_the_last_queued_counter_is_taken_from_that_attempt() {
        let slots = GrantSlots::default();
        slots.open(CH);
        let sent = queued(&slots, 10);
        slots.deliver(CH, 11);
        assert_eq!(
            slots.take(CH, FRESH),
            Some(Claim::Granted {
                token: FencingToken::new(11),
                since: sent
            })
        );
        assert_eq!(slots.take(CH, FRESH), None, "taken once");
    }

    #[test]
    fn a_grant_not_above_the_counter_is_an_old_one() {
        let slots = GrantSlots::default();
        slots.open(CH);
        slots.deliver(CH, 10); // arrived before the answer that saw counter 10
        queued(&slots, 10);
        assert_eq!(slots.take(CH, FRESH), None);
        queued(&slots, 12);
        slots.deliver(CH, 11); // late, and below what the server had since
        assert_eq!(slots.take(CH, FRESH), None);
    }

    #[test]
    fn a_grant_that_arrived_before_a_queued_attempt_went_out_is_an_old_one() {
        let slots = GrantSlots::default();
        slots.open(CH);
        slots.deliver(CH, 50);
        std::thread::sleep(Duration::from_millis(2));
        queued(&slots, 10); // the counter went back (a restart): the token alone passes
        assert_eq!(slots.take(CH, FRESH), None);
    }

    #[test]
    fn a_dropped_connection_forgets_the_grants() {
        let slots = GrantSlots::default();
        slots.open(CH);
        queued(&slots, 1);
        slots.deliver(CH, 5);
        slots.forget_grants();
        assert_eq!(slots.take(CH, FRESH), None);
    }

    #[test]
    fn a_queued_waiter_is_quiet_until_a_message_comes_or_may_have_been_lost() {
        let slots = GrantSlots::default();
        slots.open(CH);
        assert!(!slots.quiet(CH), "never answered queued");
        queued(&slots, 1);
        assert!(slots.quiet(CH));
        slots.deliver(CH, 5);
        assert!(!slots.quiet(CH), "a grant is kept");
        queued(&slots, 6);
        assert!(slots.quiet(CH));
        let before_the_loss = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        slots.forget_grants();
        assert!(!slots.quiet(CH), "a message may have been lost");
        slots.answered(CH, before_the_loss, &Answer::held(None, 6));
        assert!(
            !slots.quiet(CH),
            "an attempt sent before the loss clears nothing"
        );
        std::thread::sleep(Duration::from_millis(2));
        queued(&slots, 6);
        assert!(slots.quiet(CH), "asked the server since");
        slots.close(CH);
        assert!(!slots.quiet(CH));
    }

    #[test]
    fn no_grant_without_a_queued_answer_or_past_freshness() {
        let slots = GrantSlots::default();
        slots.open(CH);
        slots.deliver(CH, 5);
        assert_eq!(slots.take(CH, FRESH), None, "never answered queued");
        queued(&slots, 1); // drops the grant that came before it
        slots.deliver(CH, 6);
        assert_eq!(
            slots.take(CH, Duration::ZERO),
            None,
            "too old to count from"
        );
        assert!(slots.take(CH, FRESH).is_some());
    }

    #[test]
    fn messages_for_closed_slots_are_dropped() {
        let slots = GrantSlots::default();
        slots.deliver(CH, 5);
        slots.open(CH);
        queued(&slots, 1);
        assert_eq!(slots.take(CH, FRESH), None);
    }

    #[test]
    fn a_closed_slot_takes_nothing() {
        let slots = GrantSlots::default();
        slots.open(CH);
        queued(&slots, 1);
        slots.deliver(CH, 5);
        slots.close(CH);
        assert!(!slots.is_open(CH));
        assert_eq!(slots.take(CH, FRESH), None);
    }
}
