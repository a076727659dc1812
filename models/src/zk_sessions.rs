//! ZooKeeper sessions: a lock held in an ephemeral node, renewed through a follower
//! that may be cut off from the leader, the leader expiring the session a timeout
//! after the last activity it heard of.
//!
//! What the servers do: the client talks to a follower; the follower tells the leader
//! which sessions were active at each of the leader's pings (at most a quarter of the
//! session timeout apart), and the leader expires a session a timeout after the last
//! such report, deleting its ephemeral nodes — the waiter then gets the lock. A
//! follower cut off from the leader keeps answering plain reads from the copy it has,
//! but cannot complete a `sync`. The client pings whenever it has been idle for 3/8 of
//! its connection timeout (zookeeper-client), which the adapter keeps at 2/5 of the
//! session timeout: never idle for more than 3/20 of it, unless its process is paused.
//!
//! What the adapter does: a renewal is a read of the node behind a `sync` with the
//! leader, and is trusted `dlock_zk::decisions::lease_ttl(timeout)` after it was sent.
//! The mutations: a renewal read from the follower's copy without the sync (the
//! defect a review found: a renewal confirmed by a cut-off follower), and trust for
//! the whole session timeout.

use std::time::Duration;

use stateright::{Model, Property};

/// How a renewal reads the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Read {
    /// The adapter's: behind a `sync` with the leader.
    Synced,
    /// From the follower's copy alone.
    Follower,
}

/// The model's parameters, in units of a twentieth of the session timeout.
#[derive(Clone)]
pub struct Sessions {
    /// How a renewal reads the node.
    pub read: Read,
    /// The session timeout.
    pub timeout: u32,
    /// How long after it was sent a renewal is trusted.
    pub trusted_for: u32,
    /// The longest the client stays idle while it runs.
    pub ping_every: u32,
    /// The longest between two of the leader's pings (a follower's reports).
    pub report_every: u32,
    /// Nothing happens after this.
    pub horizon: u32,
}

impl Sessions {
    /// The adapter's renewal and trust.
    #[must_use]
    pub fn adapter() -> Self {
        let timeout = Duration::from_secs(20);
        let trusted = dlock_zk::decisions::lease_ttl(timeout);
        Self {
            read: Read::Synced,
            timeout: 20,
            trusted_for: u32::try_from(trusted.as_secs()).unwrap_or(20),
            ping_every: 3,
            report_every: 5,
            horizon: 45,
        }
    }

    /// Renewals read from the follower's copy.
    #[must_use]
    pub fn follower_reads() -> Self {
        Self {
            read: Read::Follower,
            ..Self::adapter()
        }
    }

    /// Renewals trusted for the whole session timeout.
    #[must_use]
    pub fn trusting_the_timeout() -> Self {
        Self {
            trusted_for: 20,
            ..Self::adapter()
        }
    }
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: u32,
    /// The session's activity the follower has not reported yet (its latest time).
    unreported: Option<u32>,
    /// When the follower last reported to the leader (the leader's pings).
    last_report: u32,
    /// The session's expiry as the leader keeps it.
    expires: u32,
    /// The node, on the leader; and on the follower's copy.
    on_leader: bool,
    on_follower: bool,
    cut_off: bool,
    /// The client's process is paused (GC, SIGSTOP).
    paused: bool,
    last_sent: u32,
    trusted_until: u32,
    waiter_holds: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time advances by one unit.
    Tick,
    /// The client pings (activity, nothing else).
    Ping,
    /// The client renews: a read of the node, its answer at once.
    Renew,
    /// The leader pings the follower, which reports the activity it saw.
    Report,
    /// The follower is cut off from the leader (for good).
    CutOff,
    /// The client's process pauses (for good).
    Pause,
    /// The waiter gets the lock, once the node is gone on the leader.
    WaiterTakes,
}

impl Model for Sessions {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            unreported: None,
            last_report: 0,
            expires: self.timeout,
            on_leader: true,
            on_follower: true,
            cut_off: false,
            paused: false,
            last_sent: 0,
            trusted_until: self.trusted_for,
            waiter_holds: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // a running client is never idle past its ping interval; the leader pings in time
        let client_due = !s.paused && s.now >= s.last_sent + self.ping_every;
        let report_due = s.now >= s.last_report + self.report_every;
        if s.now < self.horizon && !client_due && !report_due {
            actions.push(Action::Tick);
        }
        if !s.paused {
            actions.push(Action::Ping);
            actions.push(Action::Renew);
            actions.push(Action::Pause);
        }
        actions.push(Action::Report);
        if !s.cut_off {
            actions.push(Action::CutOff);
        }
        if !s.on_leader && !s.waiter_holds {
            actions.push(Action::WaiterTakes);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += 1;
                if s.on_leader && s.now >= s.expires {
                    s.on_leader = false;
                    if !s.cut_off {
                        s.on_follower = false;
                    }
                }
            }
            Action::Ping => {
                s.unreported = Some(s.now);
                s.last_sent = s.now;
            }
            Action::Renew => {
                s.unreported = Some(s.now);
                s.last_sent = s.now;
                let exists = match self.read {
                    // the sync needs the leader
                    Read::Synced => !s.cut_off && s.on_leader,
                    Read::Follower => s.on_follower,
                };
                if exists {
                    s.trusted_until = s.trusted_until.max(s.now + self.trusted_for);
                }
            }
            Action::Report => {
                if s.now < s.last_report + 1 {
                    return None;
                }
                s.last_report = s.now;
                if !s.cut_off && s.on_leader && s.unreported.take().is_some() {
                    s.expires = s.now + self.timeout;
                }
            }
            Action::CutOff => s.cut_off = true,
            Action::Pause => s.paused = true,
            Action::WaiterTakes => s.waiter_holds = true,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("exclusive", |_, s: &State| {
                !(s.waiter_holds && s.now < s.trusted_until)
            }),
            Property::sometimes("the waiter gets the lock", |_, s: &State| s.waiter_holds),
        ]
    }
}
