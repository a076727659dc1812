//! Redlock: rounds of one proposed token over N independent nodes, nodes that restart
//! empty and rest, clients whose clocks are off.
//!
//! What a node does is the `PROPOSE` script, written here as [`takes`]: a proposal is
//! taken above the node's counter, at or above its clock, and at most
//! `MAX_AHEAD_MICROS` past the larger of its clock and the highest counter a node of
//! the round named; a node up for less than the restart delay takes nothing. What the
//! client does comes from `dlock_redis::decisions`: the first proposal is its clock
//! plus `AHEAD`, a refused round proposes `reproposal(counter, clock)` above every
//! refusal, at most `PROPOSALS` times; the round wins on a quorum (undone otherwise).
//! A round is one step here (its nodes answer together); nodes restart with nothing
//! at any moment; the nodes' clocks agree, the clients' are off by the given offsets.
//!
//! Properties: tokens strictly increase across winning rounds, restarts included
//! (rule 4); a token is never more than `MAX_AHEAD_MICROS` past the nodes' clocks
//! (tokens do not ratchet ahead, so a node's rest covers every token it forgot). The
//! rule before the current one — the bound measured from the node's own counter — is
//! the model's mutation: skewed clients carry the counters ahead, 2 s a grant, and a
//! node that rested its delay then grants below a token already handed out.

use dlock_redis::decisions::{AHEAD, MAX_AHEAD_MICROS, PROPOSALS, reproposal};
use stateright::{Model, Property};

const SECOND: u64 = 1_000_000;

/// How a node measures how far past it a proposal may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// The script's: past its clock, or the highest counter the round's nodes named.
    ClockOrNamed,
    /// The earlier one: past its clock, or its own counter.
    ClockOrOwnCounter,
}

/// Whether a node with `counter` at `clock` takes `proposal` in a round whose nodes
/// named `highest` so far.
#[must_use]
pub fn takes(bound: Bound, counter: u64, clock: u64, proposal: u64, highest: u64) -> bool {
    let floor = match bound {
        Bound::ClockOrNamed => clock.max(highest),
        Bound::ClockOrOwnCounter => clock.max(counter),
    };
    proposal > counter && proposal >= clock && proposal <= floor + MAX_AHEAD_MICROS
}

/// The model's parameters (times in µs).
#[derive(Clone)]
pub struct Redlock {
    /// How a node bounds a proposal.
    pub bound: Bound,
    /// How many nodes.
    pub nodes: usize,
    /// Each client's clock less the true time.
    pub client_offsets: Vec<i64>,
    /// The lease TTL.
    pub ttl: u64,
    /// How long a restarted node grants nothing.
    pub restart_delay: u64,
    /// True time advances in steps of this.
    pub step: u64,
    /// Nothing happens after this long.
    pub horizon: u64,
    /// At most this many acquisition rounds.
    pub rounds: u8,
    /// At most this many node restarts.
    pub restarts: u8,
}

impl Redlock {
    /// The script's bound; three nodes; clients on true time, 1.5 s, 3 s and 4.5 s ahead
    /// (a run of ever more skewed clients is what once ratcheted the tokens).
    #[must_use]
    pub fn scripts() -> Self {
        Self {
            bound: Bound::ClockOrNamed,
            nodes: 3,
            client_offsets: vec![0, 1_500_000, 3_000_000, 4_500_000],
            ttl: SECOND,
            restart_delay: 3 * SECOND,
            step: SECOND / 2,
            horizon: 6 * SECOND,
            rounds: 5,
            restarts: 1,
        }
    }

    /// Deeper: five nodes, more rounds and restarts.
    #[must_use]
    pub fn deep(self) -> Self {
        Self {
            nodes: 5,
            rounds: 7,
            restarts: 2,
            horizon: 8 * SECOND,
            ..self
        }
    }

    /// The earlier bound.
    #[must_use]
    pub fn own_counter_bound() -> Self {
        Self {
            bound: Bound::ClockOrOwnCounter,
            ..Self::scripts()
        }
    }
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    counter: u64,
    /// The holder's expiry (true time: the nodes' clocks agree).
    lock: Option<u64>,
    up_since: u64,
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: u64,
    nodes: Vec<Node>,
    highest: u64,
    rounds: u8,
    restarts: u8,
    backwards: bool,
    ahead: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// True time advances by a step.
    Tick,
    /// A client's acquisition round (which client).
    Round(usize),
    /// The holder releases on every node.
    Release,
    /// A node restarts with nothing.
    Restart(usize),
}

impl Model for Redlock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let node = Node {
            counter: 0,
            lock: None,
            up_since: 0,
        };
        vec![State {
            // true time starts well past the restart delay: the nodes have been up
            now: 10 * SECOND,
            nodes: vec![node; self.nodes],
            highest: 0,
            rounds: 0,
            restarts: 0,
            backwards: false,
            ahead: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now + self.step <= 10 * SECOND + self.horizon {
            actions.push(Action::Tick);
        }
        if s.rounds < self.rounds {
            actions.extend((0..self.client_offsets.len()).map(Action::Round));
        }
        if s.nodes.iter().any(|n| n.lock.is_some()) {
            actions.push(Action::Release);
        }
        if s.restarts < self.restarts {
            actions.extend((0..self.nodes).map(Action::Restart));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += self.step;
                for n in &mut s.nodes {
                    n.lock = n.lock.filter(|&expires| s.now < expires);
                }
            }
            Action::Release => {
                for n in &mut s.nodes {
                    n.lock = None;
                }
            }
            Action::Restart(i) => {
                s.nodes[i] = Node {
                    counter: 0,
                    lock: None,
                    up_since: s.now,
                };
                s.restarts += 1;
            }
            Action::Round(client) => {
                s.rounds += 1;
                let offset = self.client_offsets[client];
                let client_clock = s.now.checked_add_signed(offset)?;
                let ahead = u64::try_from(AHEAD.as_micros()).ok()?;
                let mut proposal = client_clock + ahead;
                let mut named = 0;
                for _ in 0..PROPOSALS {
                    let mut granted = Vec::new();
                    let mut refusals = Vec::new();
                    for (i, n) in s.nodes.iter().enumerate() {
                        let resting = s.now - n.up_since < self.restart_delay;
                        if resting || n.lock.is_some() {
                            continue;
                        }
                        if takes(self.bound, n.counter, s.now, proposal, named) {
                            granted.push(i);
                        } else {
                            refusals.push((n.counter, s.now));
                        }
                    }
                    let quorum = self.nodes / 2 + 1;
                    if granted.len() >= quorum {
                        for &i in &granted {
                            s.nodes[i].counter = proposal;
                            s.nodes[i].lock = Some(s.now + self.ttl);
                        }
                        s.backwards |= proposal <= s.highest;
                        s.ahead |= proposal > s.now + MAX_AHEAD_MICROS;
                        s.highest = s.highest.max(proposal);
                        return Some(s);
                    }
                    if granted.len() + refusals.len() < quorum {
                        return Some(s); // held, or too few nodes up: no grant
                    }
                    named = refusals.iter().map(|r| r.0).max().unwrap_or(0).max(named);
                    proposal = refusals.iter().map(|&(c, t)| reproposal(c, t)).max()?;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("tokens strictly increase", |_, s: &State| !s.backwards),
            Property::always("tokens stay within reach of the clocks", |_, s: &State| {
                !s.ahead
            }),
            Property::sometimes("a grant after a restart", |_, s: &State| {
                s.restarts > 0 && s.nodes.iter().filter(|n| n.lock.is_some()).count() >= 2
            }),
        ]
    }
}
