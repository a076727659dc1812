//! Redis (one server): the acquire script's fencing token, key expiry, and a server
//! that loses its data — restored from an older snapshot, or restarted without
//! persistence (a failover to a lagging replica is the same loss).
//!
//! What the server does is the acquire and release scripts' token arithmetic, written
//! here as [`next_token`] and held to the real scripts by `tests/redis_differential.rs`:
//! the token is a hybrid clock, `max(counter + 1, server TIME in µs)`, written back to
//! the counter, which outlives the lock. The documented assumptions are the model's:
//! the server clock never steps back, and grants come at most one per microsecond on
//! average (each grant here takes at least one).
//!
//! Property (rule 4): tokens strictly increase in grant order, across every expiry,
//! release, restore and restart. Mutual exclusion is not promised across a loss of data
//! (docs/safety.md): the model checks it only while no data was lost.

use stateright::{Model, Property};

/// The server's token arithmetic: the next token after `counter` (none: lost) at
/// server time `now_us`.
#[must_use]
pub fn next_token(counter: Option<u64>, now_us: u64) -> u64 {
    match counter {
        Some(c) if c >= now_us => c + 1,
        _ => now_us,
    }
}

/// The arithmetic before the hybrid clock, kept as the model's mutation: the counter
/// alone.
#[must_use]
pub fn counter_only(counter: Option<u64>, _now_us: u64) -> u64 {
    counter.map_or(1, |c| c + 1)
}

/// The model's parameters.
#[derive(Clone)]
pub struct RedisTokens {
    /// The token arithmetic under test.
    pub next: fn(Option<u64>, u64) -> u64,
    /// Lease TTL, in µs of the server's clock.
    pub ttl: u64,
    /// The clock advances by at most this much per step.
    pub max_step: u64,
    /// Nothing happens after this server time.
    pub horizon: u64,
    /// How many clients take the lock.
    pub clients: u8,
    /// At most this many grants.
    pub grants: u8,
    /// At most this many losses of data (restores, restarts).
    pub losses: u8,
}

impl RedisTokens {
    /// The scripts' arithmetic, two clients, a few grants and data losses.
    #[must_use]
    pub fn scripts() -> Self {
        Self {
            next: next_token,
            ttl: 4,
            max_step: 3,
            horizon: 14,
            clients: 2,
            grants: 5,
            losses: 2,
        }
    }

    /// Deeper: three clients, more grants and losses, a longer run.
    #[must_use]
    pub fn deep(self) -> Self {
        Self {
            clients: 3,
            grants: 7,
            losses: 3,
            horizon: 20,
            ..self
        }
    }

    /// The counter-only arithmetic.
    #[must_use]
    pub fn counter_only() -> Self {
        Self {
            next: counter_only,
            ..Self::scripts()
        }
    }
}

/// What the server keeps: the lock (holder, expiry) and the counter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Data {
    lock: Option<(u8, u64)>,
    counter: Option<u64>,
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: u64,
    data: Data,
    /// The last `SAVE`.
    snapshot: Option<Data>,
    /// The highest token granted so far.
    highest: u64,
    grants: u8,
    losses: u8,
    backwards: bool,
    /// Two holders inside their leases while no data was lost.
    overlap: bool,
    /// Each client's lease: its token and the end of its validity.
    leases: Vec<Option<(u64, u64)>>,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The server's clock advances by this many µs.
    Tick(u64),
    /// The acquire script for a client.
    Acquire(u8),
    /// The release script for a client.
    Release(u8),
    /// A snapshot (`SAVE`, or what a replica has).
    Save,
    /// Restored from the last snapshot (older data).
    Restore,
    /// Restarted with nothing.
    Restart,
}

impl Model for RedisTokens {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            data: Data {
                lock: None,
                counter: None,
            },
            snapshot: None,
            highest: 0,
            grants: 0,
            losses: 0,
            backwards: false,
            overlap: false,
            leases: vec![None; usize::from(self.clients)],
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for d in 1..=self.max_step {
            if s.now + d <= self.horizon {
                actions.push(Action::Tick(d));
            }
        }
        for c in 0..self.clients {
            if s.grants < self.grants && s.now < self.horizon {
                actions.push(Action::Acquire(c));
            }
            if s.leases[usize::from(c)].is_some() {
                actions.push(Action::Release(c));
            }
        }
        actions.push(Action::Save);
        if s.losses < self.losses {
            if s.snapshot.is_some() {
                actions.push(Action::Restore);
            }
            actions.push(Action::Restart);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick(d) => s.now += d,
            Action::Acquire(c) => {
                let free = s.data.lock.is_none_or(|(_, expires)| s.now >= expires);
                if !free {
                    return None;
                }
                let token = (self.next)(s.data.counter, s.now);
                s.data.counter = Some(token);
                s.data.lock = Some((c, s.now + self.ttl));
                s.backwards |= token <= s.highest;
                s.highest = s.highest.max(token);
                let others_valid =
                    s.leases.iter().enumerate().any(|(i, l)| {
                        i != usize::from(c) && l.is_some_and(|(_, until)| s.now < until)
                    });
                s.overlap |= others_valid && s.losses == 0;
                s.leases[usize::from(c)] = Some((token, s.now + self.ttl));
                s.grants += 1;
                // a grant takes the server at least a microsecond (the documented
                // rate: at most one grant per µs on average)
                s.now += 1;
            }
            Action::Release(c) => {
                if s.data.lock.is_some_and(|(h, _)| h == c) {
                    s.data.lock = None; // the counter stays (retention)
                }
                s.leases[usize::from(c)] = None;
            }
            Action::Save => {
                if s.snapshot.as_ref() == Some(&s.data) {
                    return None;
                }
                s.snapshot = Some(s.data.clone());
            }
            Action::Restore => {
                s.data = s.snapshot.clone()?;
                s.losses += 1;
            }
            Action::Restart => {
                s.data = Data {
                    lock: None,
                    counter: None,
                };
                s.losses += 1;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("tokens strictly increase", |_, s: &State| !s.backwards),
            Property::always("exclusive while no data is lost", |_, s: &State| !s.overlap),
            Property::sometimes("a grant after a restore", |_, s: &State| {
                s.losses > 0 && s.grants > 2
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.now <= self.horizon + 1
    }
}
