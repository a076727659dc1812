//! The waiting side of a grant (`queue.rs`): a slot per queued acquisition that keeps
//! the grant message a release sent it, and what makes that message safe to take as
//! the lock without asking the server again.
//!
//! A message is taken only when (1) its token is above the counter the waiter's last
//! "queued" answer carried — tokens grow with every grant, so that grant came after the
//! server ran that attempt, which the waiter sent at a known moment: the lease counts
//! from there (rule 5); an older grant, lost to an expiry since, has a token at or
//! below it and is ignored — and (2) that attempt was sent recently enough that the
//! lease has most of its TTL left; otherwise the waiter's next attempt confirms the
//! grant on the server (it finds its own owner id there and refreshes the TTL).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dlock_core::FencingToken;
use dlock_core::backend::Claim;
use tokio::time::Instant;

/// A claim script's answer: the claim, and with a "held" answer the counter the server
/// had then (the floor for a later grant's token).
#[derive(Debug)]
pub(crate) struct Answer {
    pub claim: Claim,
    pub counter: u64,
}

impl Answer {
    pub(crate) fn taken(token: FencingToken) -> Self {
        Self {
            claim: Claim::Taken(token),
            counter: 0,
        }
    }

    pub(crate) fn held(remaining: Option<Duration>, counter: u64) -> Self {
        Self {
            claim: Claim::Held(remaining),
            counter,
        }
    }
}

/// The queued acquisitions of one node's client, by grant channel.
#[derive(Debug, Default)]
pub(crate) struct GrantSlots {
    slots: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    /// When the last attempt answered "queued" was sent, and the counter it carried.
    queued: Option<(Instant, u64)>,
    /// The highest token a grant message brought, and when it arrived.
    granted: Option<(u64, Instant)>,
}

impl GrantSlots {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the slot of a waiter whose subscription to `channel` the server confirmed.
    pub(crate) fn open(&self, channel: &str) {
        self.slots().entry(channel.to_owned()).or_default();
    }

    /// Whether a waiter listens on `channel` (its slot is open once its subscription
    /// is confirmed, until the subscription ends).
    pub(crate) fn is_open(&self, channel: &str) -> bool {
        self.slots().contains_key(channel)
    }

    /// Closes it.
    pub(crate) fn close(&self, channel: &str) {
        self.slots().remove(channel);
    }

    /// A grant message: `token` on `channel`. Kept only for an open slot.
    pub(crate) fn deliver(&self, channel: &str, token: u64) {
        if let Some(slot) = self.slots().get_mut(channel)
            && slot.granted.is_none_or(|(t, _)| t < token)
        {
            slot.granted = Some((token, Instant::now()));
        }
    }

    /// The connection dropped: a message may have been lost, and what arrived before
    /// is not trusted (the next attempt asks the server).
    pub(crate) fn forget_grants(&self) {
        for slot in self.slots().values_mut() {
            slot.granted = None;
        }
    }

    /// Records an attempt's answer: `sent` is when it went out.
    pub(crate) fn answered(&self, channel: &str, sent: Instant, answer: &Answer) {
        if !matches!(answer.claim, Claim::Held(_)) {
            return;
        }
        if let Some(slot) = self.slots().get_mut(channel) {
            slot.queued = Some((sent, answer.counter));
            // a grant that arrived before this attempt went out, or whose token is not
            // above what the server had when it ran it, came before: not ours now
            slot.granted = slot
                .granted
                .filter(|&(t, arrived)| t > answer.counter && arrived >= sent);
        }
    }

    /// The grant a release sent this waiter, as a claim, when it may be taken without
    /// asking the server: its token is above the last "queued" answer's counter, and
    /// that attempt went out less than `fresh_for` ago.
    pub(crate) fn take(&self, channel: &str, fresh_for: Duration) -> Option<Claim> {
        let mut slots = self.slots();
        let slot = slots.get_mut(channel)?;
        let (since, counter) = slot.queued?;
        let (token, _) = slot.granted.filter(|&(t, _)| t > counter)?;
        if since.elapsed() >= fresh_for {
            return None;
        }
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
