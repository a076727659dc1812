//! ZooKeeper tickets: a lock held in a TTL node that outlives every session, renewed
//! by whoever holds the ticket, deleted by the container manager of whichever server
//! leads.
//!
//! What the server does, as ZooKeeper 3.8's source does it: the container manager
//! looks at the applied tree at times of its own, *decides* every expired candidate —
//! a TTL node without children whose age by the current leader's wall clock exceeds its
//! TTL — and deletes the decided ones later, one by one, without looking at their age
//! again; a delete of a node that has children by then is refused. Leaders change, and
//! any two readings of the servers' wall clocks differ from the true elapsed time by at
//! most the documented bound (a leader change here moves the clock that judges from
//! one offset to the other). The taker's renewals may be late, their replies lost (and
//! the renewal retried); requests apply at any moment after they are sent.
//!
//! What the adapter does comes from `dlock_zk::decisions`: how long a renewal is
//! trusted. [`Protocol::WriteAndMeasure`] is the protocol before the current one — a
//! renewal wrote the node and trusted the gap between two stamps — kept as the model's
//! mutation: the checker finds its two holders.

use std::time::Duration;

use stateright::{Model, Property};

/// How renewals keep the ticket's node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The adapter's: each renewal creates a child with the ticket's TTL (a node with
    /// a child is never deleted), and is trusted `trusted_for` after it was sent.
    Children,
    /// The earlier one: a renewal wrote the node and was trusted only when the gap
    /// between its stamp and the one before, its round trip and a tenth of the TTL fit
    /// in the TTL; otherwise the taker gave up and deleted the node.
    WriteAndMeasure,
}

/// The model's parameters. Times are milliseconds of true time.
#[derive(Clone, Debug)]
pub struct Tickets {
    /// How renewals keep the node.
    pub protocol: Protocol,
    /// The ticket's TTL.
    pub ttl: i64,
    /// How far a leader's clock may be off the one that stamped a renewal.
    pub skew: i64,
    /// How long after it was sent a renewal is trusted.
    pub trusted_for: i64,
    /// Time moves in steps of this.
    pub step: i64,
    /// Nothing happens after this.
    pub horizon: i64,
    /// At most this many renewals (retries included).
    pub renewals: u8,
    /// At most this many leader changes.
    pub leader_changes: u8,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Tickets {
    /// The adapter's protocol and decisions, a ticket of one second, the servers'
    /// clocks as far apart as docs/safety.md allows.
    #[must_use]
    pub fn adapter() -> Self {
        let ttl = Duration::from_millis(1000);
        Self {
            protocol: Protocol::Children,
            ttl: millis(ttl),
            skew: millis(dlock_zk::decisions::server_clock_bound(ttl)),
            trusted_for: millis(dlock_zk::decisions::ticket_trusted_for(ttl)),
            step: 50,
            horizon: 1500,
            renewals: 3,
            leader_changes: 1,
        }
    }

    /// The same model explored to `horizon` ms with at most `renewals` renewals.
    #[must_use]
    pub fn bounded(mut self, horizon: i64, renewals: u8) -> Self {
        self.horizon = horizon;
        self.renewals = renewals;
        self
    }

    /// The adapter's protocol, trusting a renewal for `trusted_for` instead.
    #[must_use]
    pub fn trusting(mut self, trusted_for: Duration) -> Self {
        self.trusted_for = millis(trusted_for);
        self
    }

    /// The earlier protocol, with its trust (the TTL less the drift margin).
    #[must_use]
    pub fn write_and_measure() -> Self {
        let ttl = Duration::from_millis(1000);
        Self {
            protocol: Protocol::WriteAndMeasure,
            trusted_for: millis(ttl.saturating_sub(dlock_core::drift_margin(ttl))),
            ..Self::adapter()
        }
    }
}

/// The ticket's node on the server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    version: u8,
    /// The stamp of its last write (the leader's clock reading then).
    mtime: i64,
    /// Its renewals: sequence number and stamp.
    children: Vec<(u8, i64)>,
    next_seq: u8,
}

/// A delete the container manager decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A renewal child, by sequence number.
    Child(u8),
    /// The ticket's node.
    Node,
}

/// The taker's renewal in flight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    sent: i64,
    /// Once applied: whether it took, and (writing the node) the stamps before and
    /// after.
    applied: Option<(bool, i64, i64)>,
}

/// One state of the system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: i64,
    /// The leading server's clock less the true time.
    offset: i64,
    leader_changes: u8,
    node: Option<Node>,
    decided: Vec<Target>,
    renewals: u8,
    request: Option<Request>,
    /// The last deadline the taker trusted (true time).
    trusted_until: i64,
    taker_lost: bool,
    waiter_holds: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// True time advances by a step.
    Tick,
    /// Another server leads, its clock off by the skew from the last one.
    LeaderChange,
    /// The container manager looks and decides.
    Check,
    /// It applies its oldest decided delete.
    ApplyDelete,
    /// The taker sends a renewal (late, perhaps; a retry, perhaps).
    SendRenewal,
    /// The leader applies it.
    ApplyRenewal,
    /// Its reply is lost.
    LoseReply,
    /// Its reply reaches the taker.
    Reply,
    /// The taker deletes its oldest renewal (a newer one exists).
    Prune,
    /// The waiter, first in the queue, gets the lock once the node is gone.
    WaiterTakes,
}

impl State {
    fn clock(&self) -> i64 {
        self.now + self.offset
    }
}

impl Model for Tickets {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        // handed over at 0 and taken up at once: one renewal's trust
        let children = match self.protocol {
            Protocol::Children => vec![(0, 0)],
            Protocol::WriteAndMeasure => Vec::new(),
        };
        vec![State {
            now: 0,
            offset: 0,
            leader_changes: 0,
            node: Some(Node {
                version: 0,
                mtime: 0,
                children,
                next_seq: 1,
            }),
            decided: Vec::new(),
            renewals: 0,
            request: None,
            trusted_until: self.trusted_for,
            taker_lost: false,
            waiter_holds: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now + self.step <= self.horizon {
            actions.push(Action::Tick);
        }
        if s.leader_changes < self.leader_changes {
            actions.push(Action::LeaderChange);
        }
        actions.push(Action::Check);
        if !s.decided.is_empty() {
            actions.push(Action::ApplyDelete);
        }
        match &s.request {
            None if !s.taker_lost && s.renewals < self.renewals => {
                actions.push(Action::SendRenewal);
            }
            Some(r) if r.applied.is_none() => actions.push(Action::ApplyRenewal),
            Some(_) => {
                actions.push(Action::Reply);
                actions.push(Action::LoseReply);
            }
            None => {}
        }
        if s.node.as_ref().is_some_and(|n| n.children.len() > 1) {
            actions.push(Action::Prune);
        }
        if s.node.is_none() && !s.waiter_holds {
            actions.push(Action::WaiterTakes);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.now += self.step,
            Action::LeaderChange => {
                s.offset = self.skew - s.offset;
                s.leader_changes += 1;
            }
            Action::Check => {
                let clock = s.clock();
                let node = s.node.as_ref()?;
                let mut new = Vec::new();
                for &(seq, stamp) in &node.children {
                    if clock - stamp > self.ttl && !s.decided.contains(&Target::Child(seq)) {
                        new.push(Target::Child(seq));
                    }
                }
                if node.children.is_empty()
                    && clock - node.mtime > self.ttl
                    && !s.decided.contains(&Target::Node)
                {
                    new.push(Target::Node);
                }
                if new.is_empty() {
                    return None;
                }
                s.decided.extend(new);
            }
            Action::ApplyDelete => {
                let target = s.decided.remove(0);
                match (target, s.node.as_mut()) {
                    (Target::Child(seq), Some(n)) => n.children.retain(|c| c.0 != seq),
                    // refused while it has a child: the server checks at the delete
                    (Target::Node, Some(n)) if n.children.is_empty() => s.node = None,
                    _ => {}
                }
            }
            Action::SendRenewal => {
                s.request = Some(Request {
                    sent: s.now,
                    applied: None,
                });
                s.renewals += 1;
            }
            Action::ApplyRenewal => {
                let clock = s.clock();
                let applied = match (self.protocol, s.node.as_mut()) {
                    (_, None) => (false, 0, 0),
                    (Protocol::Children, Some(n)) => {
                        n.children.push((n.next_seq, clock));
                        n.next_seq += 1;
                        (true, 0, 0)
                    }
                    (Protocol::WriteAndMeasure, Some(n)) => {
                        let before = n.mtime;
                        n.mtime = clock;
                        n.version += 1;
                        (true, before, clock)
                    }
                };
                s.request.as_mut()?.applied = Some(applied);
            }
            Action::LoseReply => s.request = None,
            Action::Reply => {
                let r = s.request.take()?;
                let (took, before, after) = r.applied?;
                let rtt = s.now - r.sent;
                let trusted = match self.protocol {
                    Protocol::Children => took,
                    Protocol::WriteAndMeasure => {
                        took && after - before + rtt + self.ttl / 10 <= self.ttl
                    }
                };
                if trusted {
                    s.trusted_until = s.trusted_until.max(r.sent + self.trusted_for);
                } else {
                    s.taker_lost = true;
                    // the earlier protocol gave a late node up: deleted, if unwritten since
                    if took && self.protocol == Protocol::WriteAndMeasure {
                        s.node = None;
                    }
                }
            }
            Action::Prune => {
                let n = s.node.as_mut()?;
                n.children.remove(0);
            }
            Action::WaiterTakes => s.waiter_holds = true,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // rule 1: the waiter never holds while the taker's trusted lease lasts
            Property::always("exclusive", |_, s: &State| {
                !(s.waiter_holds && s.now < s.trusted_until)
            }),
            // not vacuous: the ticket does end, and a late renewal does keep it
            Property::sometimes("the waiter gets the lock", |_, s: &State| s.waiter_holds),
            Property::sometimes(
                "a renewal keeps the ticket past its first TTL",
                |m, s: &State| s.now > m.ttl && s.node.is_some() && s.now < s.trusted_until,
            ),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.now <= self.horizon
    }
}
