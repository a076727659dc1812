//! The SQL claim: one row per name, taken, renewed and released by one statement each,
//! expiring by the database's clock; statements that arrive late, replies that never
//! come, attempts retried.
//!
//! What the database does is the statements' semantics, written here in Rust as
//! [`take`], [`renew`] and [`release`] and held to PostgreSQL, MySQL and SQLite by
//! `tests/sql_differential.rs`: a free or expired row is taken with a token above the
//! last (the hybrid clock: `max(token + 1, database clock)`); a row the same owner
//! holds is taken again keeping its token, its expiry the later of the two — a
//! duplicate take, computed before a renewal it then waited behind, must not shorten
//! it. What the client does is core's: a lease is trusted until the request was sent
//! plus the TTL less the drift margin (`dlock_core::drift_margin`).
//!
//! An operator may stop the holder once, at any step: [`Stop::Revoke`] is the revoke
//! statement (`DistributedLock::revoke_holder`: the owner id becomes its revoked mark,
//! the expiry kept); [`Stop::Break`] — the holder released as its own release would
//! (`break_holder`, which `dlock release --force` once did) — is a mutation: the next
//! client takes the row while the broken one still trusts its lease.
//!
//! Properties: never two clients inside their leases (rule 1); tokens strictly increase
//! in grant order (rule 4). [`Expiry::Latest`] is the statement's; [`Expiry::Newest`]
//! — the duplicate's expiry written over the row's — is the defect a review found
//! (the PostgreSQL election overlap), kept as the model's mutation.

use std::time::Duration;

use stateright::{Model, Property};

mod statements;
pub use statements::{Expiry, Row, Stop, release, renew, revoke, take};

/// The model's parameters (times in ms).
#[derive(Clone)]
pub struct SqlClaim {
    /// How a take of its owner's row sets the expiry.
    pub rule: Expiry,
    /// The lease TTL.
    pub ttl: i64,
    /// Core's drift margin for that TTL.
    pub drift: i64,
    /// Time advances in steps of this.
    pub step: i64,
    /// Nothing happens after this.
    pub horizon: i64,
    /// How many clients.
    pub clients: u8,
    /// At most this many statements sent in all.
    pub requests: u8,
    /// How an operator may stop the holder, once.
    pub stop: Option<Stop>,
}

impl SqlClaim {
    /// The statements' rule, a lease of 100 ms (its drift margin core's), two clients.
    #[must_use]
    pub fn statements() -> Self {
        let ttl = Duration::from_millis(100);
        Self {
            rule: Expiry::Latest,
            ttl: 100,
            drift: i64::try_from(dlock_core::drift_margin(ttl).as_millis()).unwrap_or(0),
            step: 20,
            horizon: 140,
            clients: 2,
            requests: 3,
            stop: None,
        }
    }

    /// The statements with an operator who revokes the holder once, at any step, for
    /// a TTL (a longer horizon multiplies the states by the operator's every moment).
    #[must_use]
    pub fn revoking() -> Self {
        Self {
            stop: Some(Stop::Revoke),
            horizon: 100,
            ..Self::statements()
        }
    }

    /// Deeper: time in steps of a tenth of the TTL, for 1.3 TTLs, the operator's
    /// revoke in (a TTL and a half, or one more request, runs past 24 GiB of states).
    #[must_use]
    pub fn deep(self) -> Self {
        Self {
            step: 10,
            horizon: 130,
            stop: Some(Stop::Revoke),
            ..self
        }
    }

    /// The earlier rule.
    #[must_use]
    pub fn newest_expiry() -> Self {
        Self {
            rule: Expiry::Newest,
            ..Self::statements()
        }
    }

    /// An operator who breaks the holder instead of revoking it.
    #[must_use]
    pub fn breaking() -> Self {
        Self {
            stop: Some(Stop::Break),
            ..Self::revoking()
        }
    }
}

/// A statement a client sent, with the owner id of its acquisition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sent {
    /// A take (or a retry of one), sent at this time (its expiry computed from it).
    Take(u32, i64),
    /// A renewal of the lease with this token, sent at this time.
    Renew(u32, u64, i64),
}

/// A client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Its current acquisition's owner id (a new one per acquisition, as core makes).
    owner: u32,
    /// Waiting for its take's answer.
    acquiring: bool,
    /// Its lease: token and the end of its trust.
    lease: Option<(u64, i64)>,
    /// Statements sent and not yet applied.
    pending: Vec<Sent>,
    /// Applied, the answer on its way back: the statement and what it granted.
    answered: Vec<(Sent, Option<u64>)>,
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: i64,
    row: Option<Row>,
    clients: Vec<Client>,
    requests: u8,
    highest: u64,
    grants: u8,
    backwards: bool,
    /// The operator stopped the holder already.
    stopped: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The database clock advances by a step.
    Tick,
    /// A client sends a take (a retry of its acquisition, if it waits already).
    SendTake(u8),
    /// A client sends a renewal of its lease.
    SendRenew(u8),
    /// The database applies a client's pending statement (which one).
    Apply(u8, usize),
    /// Its answer reaches the client.
    Answer(u8, usize),
    /// Its answer is lost (the client gave up on it).
    LoseAnswer(u8, usize),
    /// A client releases (applied at once; its next acquisition has a new owner id).
    Release(u8),
    /// The operator stops whoever holds the row (applied at once).
    Stop,
}

impl Model for SqlClaim {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let clients = (0..self.clients)
            .map(|c| Client {
                owner: u32::from(c) * 16 + 1,
                acquiring: false,
                lease: None,
                pending: Vec::new(),
                answered: Vec::new(),
            })
            .collect();
        vec![State {
            now: 0,
            row: None,
            clients,
            requests: 0,
            highest: 0,
            grants: 0,
            backwards: false,
            stopped: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now + self.step <= self.horizon {
            actions.push(Action::Tick);
        }
        if self.stop.is_some() && !s.stopped && s.row.as_ref().is_some_and(|r| r.expires > s.now) {
            actions.push(Action::Stop);
        }
        for (i, c) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(0);
            if s.requests < self.requests {
                if c.lease.is_none() {
                    actions.push(Action::SendTake(i));
                } else {
                    actions.push(Action::SendRenew(i));
                }
            }
            for p in 0..c.pending.len() {
                actions.push(Action::Apply(i, p));
            }
            for a in 0..c.answered.len() {
                actions.push(Action::Answer(i, a));
                actions.push(Action::LoseAnswer(i, a));
            }
            if c.lease.is_some() {
                actions.push(Action::Release(i));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        match action {
            Action::Tick => s.now += self.step,
            Action::SendTake(c) => {
                let client = &mut s.clients[usize::from(c)];
                client.acquiring = true;
                client.pending.push(Sent::Take(client.owner, now));
                s.requests += 1;
            }
            Action::SendRenew(c) => {
                let client = &mut s.clients[usize::from(c)];
                let (token, _) = client.lease?;
                client.pending.push(Sent::Renew(client.owner, token, now));
                s.requests += 1;
            }
            Action::Apply(c, p) => {
                let sent = s.clients[usize::from(c)].pending.remove(p);
                let granted = match &sent {
                    Sent::Take(owner, at) => {
                        let before = s.row.clone();
                        let first = u64::try_from(now).unwrap_or(0);
                        let (row, token) = take(
                            self.rule,
                            s.row.as_ref(),
                            (*owner, at + self.ttl),
                            now,
                            first,
                        );
                        let retaken =
                            before.is_some_and(|r| r.owner == *owner && Some(r.token) == token);
                        if let (false, Some(t)) = (retaken, token) {
                            s.backwards |= s.grants > 0 && t <= s.highest;
                            s.highest = s.highest.max(t);
                            s.grants += 1;
                        }
                        s.row = row;
                        token
                    }
                    Sent::Renew(owner, token, _) => {
                        let (row, ok) = renew(s.row.as_ref(), *owner, *token, self.ttl, now);
                        s.row = row;
                        ok.then_some(*token)
                    }
                };
                s.clients[usize::from(c)].answered.push((sent, granted));
            }
            Action::Answer(c, a) => {
                let client = &mut s.clients[usize::from(c)];
                let (sent, granted) = client.answered.remove(a);
                let (owner, at) = match sent {
                    Sent::Take(o, at) | Sent::Renew(o, _, at) => (o, at),
                };
                // an answer for an acquisition already over is nobody's business
                if owner != client.owner {
                    return Some(s);
                }
                let trusted = at + self.ttl - self.drift;
                match (&sent, granted) {
                    // core hands out only a lease still valid when it arrives, and one
                    // per acquisition
                    (Sent::Take(..), Some(t)) if trusted > now && client.acquiring => {
                        client.acquiring = false;
                        client.lease = Some((t, trusted));
                    }
                    (Sent::Renew(..), Some(t)) => {
                        if let Some(l) = client.lease.as_mut().filter(|l| l.0 == t) {
                            l.1 = l.1.max(trusted);
                        }
                    }
                    (Sent::Renew(..), None) => client.lease = None,
                    _ => {}
                }
            }
            Action::LoseAnswer(c, a) => {
                s.clients[usize::from(c)].answered.remove(a);
            }
            Action::Release(c) => {
                let client = &mut s.clients[usize::from(c)];
                let (token, _) = client.lease.take()?;
                let owner = client.owner;
                // the next acquisition has an owner id of its own
                client.owner += 1;
                s.row = release(s.row.as_ref(), owner, token, now);
            }
            Action::Stop => {
                // whoever the row names (an operator reads it, then sends the
                // statement guarded by what it read)
                let r = s.row.clone()?;
                s.stopped = true;
                s.row = match self.stop? {
                    Stop::Revoke => revoke(Some(&r), r.owner, r.token, now),
                    Stop::Break => release(Some(&r), r.owner, r.token, now),
                };
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("exclusive", |_, s: &State| {
                s.clients
                    .iter()
                    .filter(|c| c.lease.is_some_and(|(_, until)| s.now < until))
                    .count()
                    <= 1
            }),
            Property::always("tokens strictly increase", |_, s: &State| !s.backwards),
            Property::sometimes("a lease passes to the other client", |_, s: &State| {
                s.highest > 0 && s.clients.iter().all(|c| c.lease.is_some())
            }),
        ]
    }
}
