//! The refresh side of the bookkeeping: when each shared lease was last refreshed,
//! whether a check of it is running, and whether it failed or died.

use tokio::time::Instant;

use super::{FRESH_PART, KEYS_READ_EVERY_REFRESH, SharedLeases};

impl SharedLeases {
    /// Whether lease `id` was refreshed recently enough to serve a renewal without
    /// another keep-alive.
    pub(crate) fn recently_refreshed(&self, id: i64) -> bool {
        self.state()
            .leases
            .get(&id)
            .is_some_and(|s| s.fresh_for(FRESH_PART))
    }

    /// Whether a read of the keys attached to lease `id` should start now (marked as
    /// started if so): not while one is in flight; at every refresh (a grid step) on a
    /// lease of a few hundred keys, so a key deleted behind its holder's back is noticed
    /// within a step or two; once per third of the TTL on a larger one, whose read is
    /// not worth repeating at every tick.
    pub(crate) fn start_check(&self, id: i64) -> bool {
        let mut g = self.state();
        let Some(s) = g.leases.get_mut(&id) else {
            return false;
        };
        let every = if s.keys.len() > KEYS_READ_EVERY_REFRESH {
            s.granted / 3
        } else {
            s.granted / FRESH_PART
        };
        let due = s.checked.is_none_or(|c| c.elapsed() >= every);
        if s.checking || !due {
            return false;
        }
        s.checking = true;
        s.checked = Some(Instant::now());
        true
    }

    /// The read of the keys attached to lease `id` finished (or failed).
    pub(crate) fn check_done(&self, id: i64) {
        if let Some(s) = self.state().leases.get_mut(&id) {
            s.checking = false;
        }
    }

    /// A refresh of lease `id` failed without an answer.
    pub(crate) fn refresh_failed(&self, id: i64) {
        if let Some(s) = self.state().leases.get_mut(&id) {
            s.failed_at = Some(Instant::now());
        }
    }

    /// Whether a refresh of lease `id` failed after `since`.
    pub(crate) fn failed_since(&self, id: i64, since: Instant) -> bool {
        self.state()
            .leases
            .get(&id)
            .and_then(|s| s.failed_at)
            .is_some_and(|f| f >= since)
    }

    /// A keep-alive sent at `sent` succeeded.
    pub(crate) fn refreshed(&self, id: i64, sent: Instant) {
        if let Some(s) = self.state().leases.get_mut(&id) {
            s.refreshed = s.refreshed.max(sent);
        }
    }

    /// The server no longer knows lease `id`: every key on it is gone.
    pub(crate) fn dead(&self, id: i64) {
        let mut g = self.state();
        if let Some(s) = g.leases.get_mut(&id) {
            s.dead = true;
            s.keys.clear();
            let secs = s.secs;
            if g.current.get(&secs) == Some(&id) {
                g.current.remove(&secs);
            }
        }
        Self::drop_if_unused(&mut g, id);
    }
}
