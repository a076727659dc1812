//! Leases kept off the acquire path: granted ahead of time or taken back on release,
//! and the record of which lease backs which held lock, so a lease can be reused
//! without a stale [`dlock_core::Lease`] ever renewing someone else's lock.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// An etcd lease ready for an acquisition: id, granted TTL, when it was last refreshed
/// (granted or kept alive).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Idle {
    pub id: i64,
    pub granted: Duration,
    pub refreshed: Instant,
}

impl Idle {
    /// Fresh enough to hand out: at least two thirds of its TTL left.
    fn fresh(&self) -> bool {
        self.refreshed.elapsed() < self.granted / 3
    }

    /// Past half of its freshness: time to have a younger one ready.
    fn aging(&self) -> bool {
        self.refreshed.elapsed() >= self.granted / 6
    }
}

/// Which acquisition a handed-out lease backs: the holder key's create revision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Assigned {
    /// The pool key it was taken under (seconds asked for).
    pub secs: i64,
    pub revision: i64,
    pub granted: Duration,
    pub refreshed: Instant,
}

#[derive(Default)]
struct State {
    /// Idle leases by TTL in whole seconds.
    idle: HashMap<i64, Vec<Idle>>,
    /// TTLs with a grant in flight.
    refilling: HashSet<i64>,
    /// Handed-out leases by id.
    assigned: HashMap<i64, Assigned>,
}

/// How many different TTLs keep idle leases.
const MAX_TTLS: usize = 8;
/// Idle leases kept per TTL; more are revoked.
const MAX_IDLE_PER_TTL: usize = 4;

/// What [`LeasePool::take`] found.
pub(crate) struct Taken {
    /// A fresh idle lease, if there was one.
    pub lease: Option<Idle>,
    /// Idle leases too old to hand out: revoke them.
    pub stale: Vec<i64>,
    /// Start a background grant so a fresh lease is ready next time.
    pub refill: bool,
}

/// The pool, shared by the clones of one `EtcdLock`.
#[derive(Default)]
pub(crate) struct LeasePool(Mutex<State>);

impl LeasePool {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The freshest idle lease for `secs`, with what to clean up and whether to refill.
    pub(crate) fn take(&self, secs: i64) -> Taken {
        let mut g = self.state();
        let refilling = g.refilling.contains(&secs);
        let ttls = g.idle.len() + g.refilling.len();
        let list = g.idle.entry(secs).or_default();
        let (fresh, stale): (Vec<Idle>, Vec<Idle>) = list.drain(..).partition(Idle::fresh);
        *list = fresh;
        list.sort_by_key(|l| l.refreshed);
        let lease = list.pop();
        let young_left = list.iter().any(|l| !l.aging()) || lease.is_some_and(|l| !l.aging());
        let refill = !young_left && !refilling && ttls < MAX_TTLS;
        if list.is_empty() {
            g.idle.remove(&secs);
        }
        if refill {
            g.refilling.insert(secs);
        }
        Taken {
            lease,
            stale: stale.into_iter().map(|l| l.id).collect(),
            refill,
        }
    }

    /// A background grant for `secs` finished (with a lease, or without after an error).
    pub(crate) fn refilled(&self, secs: i64, lease: Option<Idle>) -> Option<i64> {
        let mut g = self.state();
        g.refilling.remove(&secs);
        lease.and_then(|l| Self::put_idle(&mut g, secs, l))
    }

    /// Takes a lease back for reuse. Returns a lease to revoke if the pool is full.
    pub(crate) fn give_back(&self, secs: i64, lease: Idle) -> Option<i64> {
        let mut g = self.state();
        Self::put_idle(&mut g, secs, lease)
    }

    fn put_idle(g: &mut State, secs: i64, lease: Idle) -> Option<i64> {
        if !lease.fresh() || (!g.idle.contains_key(&secs) && g.idle.len() >= MAX_TTLS) {
            return Some(lease.id);
        }
        let list = g.idle.entry(secs).or_default();
        list.push(lease);
        if list.len() > MAX_IDLE_PER_TTL {
            list.sort_by_key(|l| l.refreshed);
            return Some(list.remove(0).id);
        }
        None
    }

    /// Records that lease `id` now backs the lock whose key was created at `revision`.
    pub(crate) fn assign(&self, id: i64, a: Assigned) {
        self.state().assigned.insert(id, a);
    }

    /// What lease `id` backs, if this client handed it out and has not taken it back.
    pub(crate) fn assigned(&self, id: i64) -> Option<Assigned> {
        self.state().assigned.get(&id).copied()
    }

    /// Whether `id` sits idle in the pool (a stale handle of a released lock).
    pub(crate) fn is_idle(&self, id: i64) -> bool {
        self.state().idle.values().flatten().any(|l| l.id == id)
    }

    /// Notes a successful keep-alive of a handed-out lease.
    pub(crate) fn refreshed(&self, id: i64, revision: i64, at: Instant) {
        if let Some(a) = self.state().assigned.get_mut(&id)
            && a.revision == revision
        {
            a.refreshed = at;
        }
    }

    /// Forgets the assignment of `id` to `revision` (released or lost); returns it.
    pub(crate) fn unassign(&self, id: i64, revision: i64) -> Option<Assigned> {
        let mut g = self.state();
        match g.assigned.get(&id) {
            Some(a) if a.revision == revision => g.assigned.remove(&id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(id: i64, age: Duration) -> Idle {
        Idle {
            id,
            granted: Duration::from_secs(9),
            refreshed: Instant::now() - age,
        }
    }

    #[tokio::test]
    async fn takes_the_freshest_and_revokes_stale_ones() {
        let p = LeasePool::default();
        assert!(p.give_back(9, idle(1, Duration::from_secs(1))).is_none());
        assert!(p.give_back(9, idle(2, Duration::ZERO)).is_none());
        // too old to keep: handed straight back for revocation
        assert_eq!(p.give_back(9, idle(3, Duration::from_secs(4))), Some(3));
        let t = p.take(9);
        assert_eq!(t.lease.map(|l| l.id), Some(2));
        assert!(t.stale.is_empty());
        assert!(!t.refill, "a young lease is still idle");
        assert!(p.is_idle(1));
        let t = p.take(9);
        assert_eq!(t.lease.map(|l| l.id), Some(1));
        let t = p.take(9);
        assert!(t.lease.is_none());
        assert!(t.refill);
        assert!(!p.take(9).refill, "one refill at a time");
        assert!(p.refilled(9, Some(idle(4, Duration::ZERO))).is_none());
        assert_eq!(p.take(9).lease.map(|l| l.id), Some(4));
    }

    #[tokio::test]
    async fn assignments_are_per_revision() {
        let p = LeasePool::default();
        let a = Assigned {
            secs: 9,
            revision: 10,
            granted: Duration::from_secs(9),
            refreshed: Instant::now(),
        };
        p.assign(7, a);
        assert!(
            p.unassign(7, 9).is_none(),
            "a stale revision cannot unassign"
        );
        assert_eq!(p.assigned(7).map(|a| a.revision), Some(10));
        assert!(p.unassign(7, 10).is_some());
        assert!(p.assigned(7).is_none());
    }

    #[tokio::test]
    async fn a_full_pool_hands_leases_back_for_revocation() {
        let p = LeasePool::default();
        for id in 0..4 {
            assert!(p.give_back(9, idle(id, Duration::ZERO)).is_none());
        }
        assert!(p.give_back(9, idle(9, Duration::ZERO)).is_some());
    }
}
