//! Shared leases: every lock a client takes with one TTL hangs on one etcd lease, so
//! keeping N locks alive costs one keep-alive per renewal tick, not N. Each lock keeps
//! its own expiry all the same: the client deletes a lock's key once that lock has gone
//! a TTL without renewal (see `sweeper`), and if the client dies or is cut off, the
//! shared lease expires on the server and takes every key with it.
//!
//! This module is the bookkeeping only; the RPCs live in `leases` and `lock`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A key on a shared lease: a holder, a waiter, or an acquisition whose outcome is
/// unknown.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Create revision once the key is known to exist; 0 before.
    revision: i64,
    /// When the client deletes the key unless it is renewed (or released) first.
    deadline: Instant,
    /// When the key was known to exist: attachment checks sent earlier cannot judge it.
    confirmed: Option<Instant>,
    /// When the last read of the lease's keys that still showed the key was sent (at
    /// first: before the request that creates it): the holder trusts the key at most
    /// [`trusted_after_seen`] past it.
    seen: Instant,
    /// Expired and handed to the sweeper: no longer held.
    swept: bool,
}

/// One etcd lease shared by the client's locks with one TTL.
struct Shared {
    secs: i64,
    granted: Duration,
    /// Send time of the last grant or successful keep-alive.
    refreshed: Instant,
    /// The server no longer knows the lease: every key on it is gone.
    dead: bool,
    keys: HashMap<String, Entry>,
    /// One refresh at a time; the others wait for it and use its result.
    gate: Arc<tokio::sync::Mutex<()>>,
    /// When the last refresh failed without an answer: renewals that were waiting for
    /// it fail too instead of each trying again in turn.
    failed_at: Option<Instant>,
    /// A read of the keys attached to the lease is in flight (one at a time, and never
    /// on a renewal's path: at many keys it is a large response).
    checking: bool,
    /// When the last read of the attached keys started.
    checked: Option<Instant>,
}

impl Shared {
    fn fresh_for(&self, part: u32) -> bool {
        !self.dead && self.refreshed.elapsed() < self.granted / part
    }

    /// Full: new acquisitions take a new lease, so the read of the keys attached to
    /// one lease stays far below gRPC's 4 MiB message limit.
    fn full(&self) -> bool {
        self.keys.len() >= KEYS_PER_LEASE
    }
}

/// Keys per shared lease: at about 100 bytes per key in the attached-keys read, 4 096
/// keys are a 400 KiB response, and still below gRPC's 4 MiB at the longest keys
/// (about 1 KiB: a long name escaped, a holder value in the owner id).
const KEYS_PER_LEASE: usize = 4096;

/// Above this many keys a lease's attached keys are read once per third of the TTL
/// instead of at every refresh (a grid step): the read grows with the keys.
const KEYS_READ_EVERY_REFRESH: usize = 512;

#[derive(Default)]
struct State {
    leases: HashMap<i64, Shared>,
    /// The lease new acquisitions use, by TTL in whole seconds.
    current: HashMap<i64, i64>,
    /// TTLs with a background refresh or grant in flight.
    refreshing: HashSet<i64>,
    /// When the sweeper will look next: earlier deadlines wake it.
    sweeper_wakes: Option<Instant>,
}

/// A lease an acquisition can use now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usable {
    pub id: i64,
    pub granted: Duration,
    pub refreshed: Instant,
    /// Past half of its freshness: refresh it in the background.
    pub aging: bool,
}

/// What the client knows about a lock held through lease `id`.
#[derive(Clone, Debug)]
pub(crate) enum Lookup {
    /// Not a lease of this client (another client's, or one already dropped).
    Unknown,
    /// This client's lease, but the key is not held (released, expired, deleted).
    NotHeld,
    /// Held, on a lease last refreshed at `refreshed`, trusted at most until
    /// `seen_bound` (from the last read that still showed the key on it).
    Held {
        granted: Duration,
        refreshed: Instant,
        seen_bound: Instant,
        gate: Arc<tokio::sync::Mutex<()>>,
    },
}

/// How long after a read of its lease's keys still showed its key a holder goes on
/// trusting it: twice the lease's TTL. A key can leave the lease without the lease
/// ending (an operator's revoke moves it onto a lease of its own); the holder learns
/// it from the next read, and a holder whose reads go unanswered must stop before the
/// lease its key was moved onto ends, however long its keep-alives keep answering.
/// Reads follow every refresh, so in health the bound is far off.
#[must_use]
pub fn trusted_after_seen(granted: Duration) -> Duration {
    granted.saturating_mul(2)
}

/// The instant a key last seen at `seen` on a lease of `granted` is trusted until:
/// [`trusted_after_seen`] less its drift margin (the client's clock may run slower
/// than the server's that ends the lease the key was moved onto).
fn seen_bound(seen: Instant, granted: Duration) -> Instant {
    let trusted = trusted_after_seen(granted);
    seen + trusted.saturating_sub(dlock_core::drift_margin(trusted))
}

/// A key the sweeper should delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Expired {
    pub lease: i64,
    pub key: String,
}

/// The shared leases of one client (shared by its clones).
#[derive(Default)]
pub(crate) struct SharedLeases {
    state: Mutex<State>,
    /// Wakes the sweeper when a deadline earlier than the ones it knows appears.
    pub(crate) sweep: Notify,
}

/// Renewals, and acquisitions after a refresh, count as fresh within this share of the
/// TTL: one grid step, so every guard due in one tick rides on one keep-alive.
const FRESH_PART: u32 = 12;

impl SharedLeases {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current lease for `secs` if at least two thirds of its TTL are left, and
    /// whether a background refresh should start (marked as started if so).
    pub(crate) fn usable(&self, secs: i64) -> (Option<Usable>, bool) {
        let mut g = self.state();
        let found = g
            .current
            .get(&secs)
            .and_then(|id| g.leases.get(id).map(|s| (*id, s)))
            .filter(|(_, s)| s.fresh_for(3) && !s.full())
            .map(|(id, s)| Usable {
                id,
                granted: s.granted,
                refreshed: s.refreshed,
                aging: !s.fresh_for(6),
            });
        let refresh = found.is_some_and(|u| u.aging) && g.refreshing.insert(secs);
        (found, refresh)
    }

    /// Makes a newly granted lease the current one for `secs`.
    pub(crate) fn install(&self, secs: i64, id: i64, granted: Duration, refreshed: Instant) {
        let mut g = self.state();
        g.leases.insert(
            id,
            Shared {
                secs,
                granted,
                refreshed,
                dead: false,
                keys: HashMap::new(),
                gate: Arc::default(),
                failed_at: None,
                checking: false,
                checked: None,
            },
        );
        if let Some(old) = g.current.insert(secs, id) {
            Self::drop_if_unused(&mut g, old);
        }
    }

    /// A background refresh for `secs` finished.
    pub(crate) fn refresh_done(&self, secs: i64) {
        self.state().refreshing.remove(&secs);
    }

    /// The current lease for `secs`, to refresh in the background.
    pub(crate) fn current(&self, secs: i64) -> Option<i64> {
        self.state().current.get(&secs).copied()
    }

    /// Notes `key` on lease `id` before the request that may create it is sent, so the
    /// sweeper deletes it by `deadline` whatever happens to the request.
    pub(crate) fn expect(&self, id: i64, key: &str, deadline: Instant) {
        let mut g = self.state();
        if let Some(s) = g.leases.get_mut(&id) {
            s.keys.insert(
                key.to_owned(),
                Entry {
                    revision: 0,
                    deadline,
                    confirmed: None,
                    seen: Instant::now(),
                    swept: false,
                },
            );
        }
        self.wake_sweeper_by(g, deadline);
    }

    /// Wakes the sweeper if it would otherwise look only after `deadline`.
    fn wake_sweeper_by(&self, mut g: MutexGuard<'_, State>, deadline: Instant) {
        if g.sweeper_wakes.is_none_or(|w| deadline < w) {
            g.sweeper_wakes = Some(deadline);
            drop(g);
            self.sweep.notify_one();
        }
    }

    /// The sweeper's next look, as it plans it.
    pub(crate) fn sweeper_plans(&self, wake: Instant) {
        self.state().sweeper_wakes = Some(wake);
    }

    /// The key exists, created at `revision`; the sweeper deletes it at `deadline`
    /// unless it is renewed or released first.
    pub(crate) fn confirm(&self, id: i64, key: &str, revision: i64, deadline: Instant) {
        if let Some(e) = self
            .state()
            .leases
            .get_mut(&id)
            .and_then(|s| s.keys.get_mut(key))
        {
            e.revision = revision;
            e.deadline = deadline;
            e.confirmed = Some(Instant::now());
        }
    }

    /// Moves the deadline of a key that is still ours (a renewal, or a waiter that is
    /// still waiting). `false` if it is not held any more.
    pub(crate) fn extend(&self, id: i64, key: &str, revision: i64, deadline: Instant) -> bool {
        let mut g = self.state();
        match g.leases.get_mut(&id).and_then(|s| s.keys.get_mut(key)) {
            Some(e) if !e.swept && e.revision == revision => {
                e.deadline = e.deadline.max(deadline);
                true
            }
            _ => false,
        }
    }

    /// The acquisition will not use `key`: the sweeper deletes it by `deadline` (soon
    /// for a key that may exist, later for one whose create might still land).
    pub(crate) fn abandon(&self, id: i64, key: &str, deadline: Instant) {
        let mut g = self.state();
        if let Some(e) = g.leases.get_mut(&id).and_then(|s| s.keys.get_mut(key)) {
            e.deadline = deadline;
            e.revision = 0;
        }
        self.wake_sweeper_by(g, deadline);
    }

    /// Forgets a key known not to exist (the request that could have created it was
    /// answered and did not).
    pub(crate) fn forget(&self, id: i64, key: &str) {
        let mut g = self.state();
        if let Some(s) = g.leases.get_mut(&id) {
            s.keys.remove(key);
        }
        Self::drop_if_unused(&mut g, id);
    }

    /// Releases `key` if it is held at `revision`; `true` if it was.
    pub(crate) fn release(&self, id: i64, key: &str, revision: i64) -> bool {
        let mut g = self.state();
        let held = match g.leases.get_mut(&id) {
            Some(s) => match s.keys.get(key) {
                Some(e) if e.revision == revision && !e.swept => {
                    s.keys.remove(key);
                    true
                }
                _ => false,
            },
            None => false,
        };
        Self::drop_if_unused(&mut g, id);
        held
    }

    /// A lease with no keys that new acquisitions no longer use is forgotten (it
    /// expires on the server by itself) — but not within a TTL of its last refresh: an
    /// acquisition handed it by `lease_for` may not have noted its key yet (another
    /// grant can replace it as the current lease in between), and a key created on a
    /// forgotten lease could never be renewed. The sweeper forgets it later.
    fn drop_if_unused(g: &mut State, id: i64) {
        let unused = g.leases.get(&id).is_some_and(|s| {
            s.keys.is_empty()
                && (s.dead
                    || (g.current.get(&s.secs) != Some(&id) && s.refreshed.elapsed() >= s.granted))
        });
        if unused {
            g.leases.remove(&id);
        }
    }

    /// What the client knows of `key` held at `revision` through lease `id`.
    pub(crate) fn lookup(&self, id: i64, key: &str, revision: i64) -> Lookup {
        let g = self.state();
        let Some(s) = g.leases.get(&id) else {
            return Lookup::Unknown;
        };
        match s.keys.get(key) {
            Some(e) if e.revision == revision && !e.swept && !s.dead => Lookup::Held {
                granted: s.granted,
                refreshed: s.refreshed,
                seen_bound: seen_bound(e.seen, s.granted),
                gate: Arc::clone(&s.gate),
            },
            _ => Lookup::NotHeld,
        }
    }

    /// Renews `key` held at `revision` without a request when lease `id` was refreshed
    /// within the last grid step: its TTL, last refresh and the bound from the last
    /// read that showed it, or `None` when a refresh is due or the key is not held (the
    /// caller then takes the slow path).
    pub(crate) fn renew_if_fresh(
        &self,
        id: i64,
        key: &str,
        revision: i64,
    ) -> Option<(Duration, Instant, Instant)> {
        let mut g = self.state();
        let s = g.leases.get_mut(&id)?;
        if !s.fresh_for(FRESH_PART) {
            return None;
        }
        let (granted, refreshed) = (s.granted, s.refreshed);
        let e = s.keys.get_mut(key)?;
        if e.swept || e.revision != revision {
            return None;
        }
        e.deadline = e.deadline.max(Instant::now() + granted);
        Some((granted, refreshed, seen_bound(e.seen, granted)))
    }
}

mod health;
mod sweep;
#[cfg(test)]
mod tests;
