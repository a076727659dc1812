//! One name's queue in the memory table: holders and waiters in the order they came,
//! decided by the queue family's rule ([`crate::backend::standing`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::{Standing, standing};
use crate::{Access, FencingToken, HolderValue, Holding, Lease, LockError, LockName, OwnerId};

/// Holders and waiters of one name (of one primitive), oldest first, and the name's
/// fencing counter, which never goes back.
#[derive(Default)]
pub(super) struct Queue {
    entries: VecDeque<Entry>,
    last_token: u64,
}

pub(super) struct Entry {
    pub id: u64,
    pub owner: OwnerId,
    pub access: Access,
    pub held: Option<Hold>,
    pub wake: Arc<Notify>,
    /// What the holder proclaimed last.
    pub proclaimed: Option<HolderValue>,
}

#[derive(Clone, Copy)]
pub(super) struct Hold {
    pub token: FencingToken,
    pub expires_at: Instant,
}

impl Queue {
    /// Drops holders whose lease ran out; waiters the change lets in are woken.
    pub fn expire(&mut self, name: &LockName, now: Instant) {
        let before = self.entries.len();
        self.entries
            .retain(|e| e.held.is_none_or(|h| h.expires_at > now));
        if self.entries.len() != before {
            self.wake_ready(name);
        }
    }

    /// Where the entry at `index` stands behind the ones before it.
    pub fn standing_at(&self, name: &LockName, index: usize) -> Result<Standing, LockError> {
        let me = self
            .entries
            .get(index)
            .map_or(Access::Exclusive, |e| e.access);
        self.standing_of(name, me, index)
    }

    /// Where a new entry of `me` would stand behind the first `ahead` entries.
    pub fn standing_of(
        &self,
        name: &LockName,
        me: Access,
        ahead: usize,
    ) -> Result<Standing, LockError> {
        let accesses: Vec<Access> = self.entries.iter().take(ahead).map(|e| e.access).collect();
        standing(name, me, &accesses)
    }

    /// Wakes exactly the waiters that may hold now (a release admits one mutex waiter,
    /// one permit waiter, or the readers behind a writer).
    pub fn wake_ready(&self, name: &LockName) {
        for (i, e) in self.entries.iter().enumerate() {
            if e.held.is_none() && matches!(self.standing_at(name, i), Ok(Standing::Holds)) {
                e.wake.notify_one();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn position(&self, id: u64) -> Option<usize> {
        self.entries.iter().position(|e| e.id == id)
    }

    /// Appends an entry (a holder when `held`), returning its position.
    pub fn push(&mut self, entry: Entry) -> usize {
        self.entries.push_back(entry);
        self.entries.len() - 1
    }

    /// Makes the entry at `index` a holder for `ttl` with the next token.
    pub fn grant(&mut self, index: usize, ttl: Duration, now: Instant) -> Option<FencingToken> {
        self.last_token += 1;
        let token = FencingToken::new(self.last_token);
        let entry = self.entries.get_mut(index)?;
        entry.held = Some(Hold {
            token,
            expires_at: now + ttl,
        });
        // the next waiter armed no timer while this one only waited: wake it to arm
        // one for this lease's expiry, which nothing else would notice
        if let Some(next) = self
            .entries
            .iter()
            .skip(index + 1)
            .find(|e| e.held.is_none())
        {
            next.wake.notify_one();
        }
        Some(token)
    }

    /// Removes the entry with this id (a waiter leaving, or a release); waiters the
    /// change lets in are woken.
    pub fn remove(&mut self, name: &LockName, id: u64) -> Option<Entry> {
        let index = self.position(id)?;
        let entry = self.entries.remove(index);
        self.wake_ready(name);
        self.rearm_from(index);
        entry
    }

    /// Wakes the first waiter at or after `index` to arm its timer again. Only the
    /// first waiter's timer notices an expiry ahead (its look at the queue expires the
    /// holder and wakes whoever may hold then), so it must be armed for the holders
    /// ahead of it now: after a grant ahead of it (a lease it armed nothing for), or
    /// when it became the first waiter because the one before it left.
    fn rearm_from(&self, index: usize) {
        if let Some(next) = self.entries.iter().skip(index).find(|e| e.held.is_none()) {
            next.wake.notify_one();
        }
    }

    /// The unexpired holder entry `lease` names.
    pub fn holder_of(&mut self, lease: &Lease, now: Instant) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| {
            e.owner == *lease.owner()
                && e.access == lease.access()
                && e.held
                    .is_some_and(|h| h.token == lease.token() && h.expires_at > now)
        })
    }

    /// What the holder of `token` proclaimed last, if anything.
    pub fn proclaimed(&self, token: FencingToken) -> Option<HolderValue> {
        self.entries
            .iter()
            .find(|e| e.held.is_some_and(|h| h.token == token))
            .and_then(|e| e.proclaimed.clone())
    }

    /// When the earliest lease among the first `ahead` entries runs out.
    pub fn first_expiry(&self, ahead: usize) -> Option<Instant> {
        self.entries
            .iter()
            .take(ahead)
            .filter_map(|e| e.held.map(|h| h.expires_at))
            .min()
    }

    /// The holders, oldest grant first.
    pub fn holders(&self, now: Instant) -> Vec<Holding> {
        let mut out: Vec<Holding> = self
            .entries
            .iter()
            .filter_map(|e| {
                let h = e.held.filter(|h| h.expires_at > now)?;
                Some(Holding::new(
                    e.access,
                    e.owner.clone(),
                    h.token,
                    h.expires_at.saturating_duration_since(now),
                ))
            })
            .collect();
        out.sort_by_key(|h| h.token);
        out
    }
}
