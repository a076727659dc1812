//! The queue family's rule on ZooKeeper and etcd: entries in creation order, each
//! client deciding from a listing where it stands and which entries ahead to watch,
//! woken when a watched entry is deleted, listing again.
//!
//! What the servers do, as both do it: an entry is appended behind every existing one
//! (a sequential node; a key with a higher create revision); a delete — a release, a
//! waiter giving up, a session or lease ending with a crashed client — removes it; a
//! watch set on an entry fires once it is deleted, however late the client set it (a
//! ZooKeeper `exists` on a node already gone answers at once; an etcd watch opened
//! from the listing's revision replays the delete), and its event is delivered at any
//! later moment. What the adapters decide is core's
//! [`dlock_core::backend::standing`]: whether the client holds given the accesses
//! ahead of it, and else which of them to watch.
//!
//! Properties: the holders by their own last listing are compatible (one mutex or
//! writer holder; no reader beside a writer; at most `n` permits), and no wake-up is
//! lost: a waiter that would hold, or be refused (its count no longer the oldest's),
//! by the queue as it is has an event coming — after any release, any waiter ahead
//! giving up — whatever the order of joins, deletes and deliveries. Two rules that
//! watch fewer entries are the model's mutations: only the one right before (a permit
//! waiter sleeps through a release further ahead), and the earlier permit rule (with
//! an entry of another count ahead, the ones before it unwatched: a release there
//! leaves the waiter refused and asleep, a permit idle behind it).

use dlock_core::backend::{Standing, standing};
use dlock_core::{Access, LockError, LockName};
use stateright::{Model, Property};

/// Which entries ahead a waiter watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Watch {
    /// Core's rule ([`standing`]'s range).
    Standing,
    /// Only the entry right before it.
    Predecessor,
    /// The earlier permit rule: with an entry of another count ahead, from the first
    /// such entry (or the `n` right before, if earlier) — not the ones before it, whose
    /// deletion may leave this entry refused.
    FromFirstForeign,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct Queue {
    /// What each client asks for.
    pub accesses: Vec<Access>,
    /// Which entries a waiter watches.
    pub watch: Watch,
}

impl Queue {
    /// A read-write lock: `clients` readers and writers, alternating.
    #[must_use]
    pub fn read_write(clients: usize) -> Self {
        let rw = [Access::Read, Access::Write];
        Self::of((0..clients).map(|i| rw[i % 2]).collect())
    }

    /// A semaphore of two permits and `clients` clients.
    #[must_use]
    pub fn permits(clients: usize) -> Self {
        Self::of(vec![Access::Permit(2); clients])
    }

    /// A semaphore asked for with two counts: `clients` clients, every third with
    /// three permits, the others with two (a caller of the other count is refused
    /// when the oldest entry's count differs, and waits out one further ahead).
    #[must_use]
    pub fn mixed_permits(clients: usize) -> Self {
        Self::of(
            (0..clients)
                .map(|i| Access::Permit(if i % 3 == 2 { 3 } else { 2 }))
                .collect(),
        )
    }

    /// The mutex: `clients` clients.
    #[must_use]
    pub fn mutex(clients: usize) -> Self {
        Self::of(vec![Access::Exclusive; clients])
    }

    fn of(accesses: Vec<Access>) -> Self {
        Self {
            accesses,
            watch: Watch::Standing,
        }
    }

    /// The same clients, each watching only its predecessor.
    #[must_use]
    pub fn watching_the_predecessor(self) -> Self {
        Self {
            watch: Watch::Predecessor,
            ..self
        }
    }

    /// The same clients under the earlier permit rule.
    #[must_use]
    pub fn watching_from_the_first_foreign_count(self) -> Self {
        Self {
            watch: Watch::FromFirstForeign,
            ..self
        }
    }
}

/// Where a client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not queued yet.
    Idle,
    /// Its entry is in the queue; it lists next.
    Listing,
    /// Waiting on these clients' entries.
    Watching(Vec<u8>),
    /// Holds by its last listing.
    Holding,
    /// Released, or gave up.
    Done,
}

/// One state: the queue (client ids in creation order) and each client's phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    queue: Vec<u8>,
    phases: Vec<Phase>,
    /// A client woken from waiting has held.
    woken_holds: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A client appends its entry.
    Join(u8),
    /// A client lists the queue and decides.
    List(u8),
    /// A watch event is delivered: an entry the client watched is gone.
    Woken(u8),
    /// A holder deletes its entry (a release, or its session or lease ending).
    Release(u8),
    /// A waiter deletes its entry (it gave up, or crashed).
    GiveUp(u8),
}

impl Queue {
    fn name() -> LockName {
        LockName::new("model").unwrap_or_else(|_| unreachable!("a valid name"))
    }

    /// Where client `i` stands in `queue`, and whom it watches; `Done` when the rule
    /// refuses it (a permit count other than the oldest entry's: it leaves).
    fn decide(&self, queue: &[u8], i: u8) -> Option<Phase> {
        let at = queue.iter().position(|&c| c == i)?;
        let ahead: Vec<Access> = queue[..at]
            .iter()
            .map(|&c| self.accesses[usize::from(c)])
            .collect();
        match standing(&Self::name(), self.accesses[usize::from(i)], &ahead) {
            Err(LockError::PermitsMismatch { .. }) => Some(Phase::Done),
            Err(_) => None,
            Ok(Standing::Holds) => Some(Phase::Holding),
            Ok(Standing::Waits(range)) => {
                let me = self.accesses[usize::from(i)];
                let range = match (self.watch, me) {
                    (Watch::Predecessor, _) => at - 1..at,
                    (Watch::FromFirstForeign, Access::Permit(n)) => {
                        let n = usize::try_from(n).unwrap_or(usize::MAX);
                        match ahead.iter().position(|a| *a != me) {
                            Some(first) => first.min(at.saturating_sub(n))..at,
                            None => range,
                        }
                    }
                    _ => range,
                };
                Some(Phase::Watching(queue[range].to_vec()))
            }
        }
    }

    /// No waiter that would hold — or be refused, and leave — by the queue as it is
    /// now is left without an event coming.
    fn awake(&self, s: &State) -> bool {
        s.phases.iter().enumerate().all(|(i, p)| match p {
            Phase::Watching(watched) if watched.iter().all(|w| s.queue.contains(w)) => {
                let i = u8::try_from(i).unwrap_or(u8::MAX);
                !matches!(self.decide(&s.queue, i), Some(Phase::Holding | Phase::Done))
            }
            _ => true,
        })
    }

    fn compatible(&self, s: &State) -> bool {
        let holding: Vec<Access> = s
            .phases
            .iter()
            .zip(&self.accesses)
            .filter(|(p, _)| **p == Phase::Holding)
            .map(|(_, a)| *a)
            .collect();
        let alone = holding
            .iter()
            .any(|a| matches!(a, Access::Exclusive | Access::Write));
        let permits = holding.iter().find_map(|a| match a {
            Access::Permit(n) => Some(*n),
            _ => None,
        });
        let one_count = permits.is_none_or(|n| {
            holding.iter().all(|a| *a == Access::Permit(n))
                && holding.len() <= usize::try_from(n).unwrap_or(usize::MAX)
        });
        !(alone && holding.len() > 1) && one_count
    }
}

impl Model for Queue {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            queue: Vec::new(),
            phases: vec![Phase::Idle; self.accesses.len()],
            woken_holds: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for (i, p) in s.phases.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            match p {
                Phase::Idle => actions.push(Action::Join(i)),
                Phase::Listing => actions.push(Action::List(i)),
                Phase::Watching(watched) => {
                    if watched.iter().any(|w| !s.queue.contains(w)) {
                        actions.push(Action::Woken(i));
                    }
                    actions.push(Action::GiveUp(i));
                }
                Phase::Holding => actions.push(Action::Release(i)),
                Phase::Done => {}
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Join(i) => {
                s.queue.push(i);
                s.phases[usize::from(i)] = Phase::Listing;
            }
            Action::List(i) => {
                let decided = self.decide(&s.queue, i)?;
                if decided == Phase::Done {
                    s.queue.retain(|&c| c != i); // refused: it leaves
                }
                s.phases[usize::from(i)] = decided;
            }
            Action::Woken(i) => {
                s.phases[usize::from(i)] = Phase::Listing;
                let decided = self.decide(&s.queue, i);
                s.woken_holds |= decided == Some(Phase::Holding);
            }
            Action::Release(i) | Action::GiveUp(i) => {
                s.queue.retain(|&c| c != i);
                s.phases[usize::from(i)] = Phase::Done;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // rules 1 and 2: one mutex or writer holder, readers never beside a
            // writer, at most n permits
            Property::always("compatible holders", |m: &Self, s: &State| m.compatible(s)),
            // no lost wake-up: a waiter that would hold by the queue as it is now has
            // an event coming (an entry it watched is gone) — after a release, and
            // after a waiter ahead gave up
            Property::always("no lost wake-up", |m: &Self, s: &State| m.awake(s)),
            // not vacuous: a waiter is woken and holds
            Property::sometimes("a woken waiter holds", |_, s: &State| s.woken_holds),
        ]
    }
}
