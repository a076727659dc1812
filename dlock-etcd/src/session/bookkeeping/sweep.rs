//! The sweeper's side of the bookkeeping: which keys are attached to a lease on the
//! server, which have expired, and what the sweeper did with them.

use std::collections::HashSet;

use tokio::time::Instant;

use super::{Entry, Expired, SharedLeases};

impl SharedLeases {
    /// The keys attached to lease `id` as read by a request sent at `sent`: a confirmed
    /// key missing from them was deleted by someone else, and is not held any more.
    ///
    /// An attached key the client does not know is a stray: a create retried after a
    /// lost reply that committed after its acquisition gave up and after the sweeper's
    /// delete. Nobody will release it, and every lock with this TTL keeps the lease
    /// alive, so it would block its name for as long as the client lives: the sweeper
    /// deletes it at `stray_deadline` (after a grace period, so a delete already in
    /// flight goes first). Keys on this client's lease carry this client's owner ids
    /// only, so deleting one never touches another client's lock.
    pub(crate) fn attached(
        &self,
        id: i64,
        sent: Instant,
        keys: &HashSet<String>,
        stray_deadline: Instant,
    ) {
        let mut g = self.state();
        let Some(s) = g.leases.get_mut(&id) else {
            return;
        };
        s.keys
            .retain(|k, e| e.swept || e.confirmed.is_none_or(|c| c >= sent) || keys.contains(k));
        for (k, e) in &mut s.keys {
            if keys.contains(k) {
                e.seen = e.seen.max(sent);
            }
        }
        let mut strays = false;
        for k in keys {
            if !s.keys.contains_key(k) {
                tracing::warn!(key = %k, "a lock key nobody tracks is attached to this client's etcd lease; deleting it");
                s.keys.insert(
                    k.clone(),
                    Entry {
                        revision: 0,
                        deadline: stray_deadline,
                        confirmed: None,
                        seen: sent,
                        swept: false,
                    },
                );
                strays = true;
            }
        }
        if strays {
            self.wake_sweeper_by(g, stray_deadline);
        }
    }

    /// Keys past their deadline, marked as swept, and the next deadline after them.
    pub(crate) fn expired(&self, now: Instant) -> (Vec<Expired>, Option<Instant>) {
        let mut g = self.state();
        let idle: Vec<i64> = g.leases.keys().copied().collect();
        for id in idle {
            Self::drop_if_unused(&mut g, id);
        }
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, s) in &mut g.leases {
            for (k, e) in &mut s.keys {
                if e.swept {
                    continue;
                }
                if e.deadline <= now {
                    e.swept = true;
                    due.push(Expired {
                        lease: *id,
                        key: k.clone(),
                    });
                } else {
                    next = Some(next.map_or(e.deadline, |n| n.min(e.deadline)));
                }
            }
        }
        (due, next)
    }

    /// The sweeper deleted `key` (or it was already gone).
    pub(crate) fn swept(&self, e: &Expired) {
        let mut g = self.state();
        if let Some(s) = g.leases.get_mut(&e.lease)
            && s.keys.get(&e.key).is_some_and(|k| k.swept)
        {
            s.keys.remove(&e.key);
        }
        Self::drop_if_unused(&mut g, e.lease);
    }

    /// The sweeper could not delete `key`: try again at `retry`.
    pub(crate) fn sweep_failed(&self, e: &Expired, retry: Instant) {
        if let Some(k) = self
            .state()
            .leases
            .get_mut(&e.lease)
            .and_then(|s| s.keys.get_mut(&e.key))
        {
            k.swept = false;
            k.revision = 0;
            k.deadline = retry;
        }
    }
}
