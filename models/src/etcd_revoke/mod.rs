//! etcd: locks as keys on shared leases, a queue by create revision, and an operator
//! revoking the holder by moving its key onto a lease that ends on its own.
//!
//! What the server does, as etcd's lessor and MVCC store do it: a lease ends when its
//! TTL passes without a keep-alive (measured by the leader from when it applied the
//! last one) and takes its keys with it — the operator's guard marker up to the slack
//! late (the leader revokes expired leases in batches, late under load); a keep-alive of a live lease
//! restarts its TTL; a new leader extends every lease to at least a full TTL; a put
//! onto a lease that has ended fails; create revisions only grow; a txn's compares and
//! writes are one step; reads are linearizable. The holder is the client key with the
//! lowest create revision, and that revision is its token.
//!
//! What the adapter does: a client's keys hang on its shared lease; a keep-alive is
//! trusted one TTL from when it was sent; after each one, a read of the keys attached
//! to the lease tells the client whether its key is still there (missing: it lets go
//! and deletes it). A holder trusts its lock until the earlier of its lease's last
//! refresh plus the TTL and the last read that still showed its key plus
//! `dlock_etcd::decisions::trusted_after_seen` — so a holder whose reads go
//! unanswered stops. The operator's revoke takes the leases of
//! `dlock_etcd::decisions`: a guard lease (`revoke_guard`) granted first, with a
//! marker key on it, then the hold lease (`revoke_hold`: past the guard by the trust
//! and a slack); the move of the holder's key onto the hold lease is a txn that also
//! requires the marker; once it landed, one keep-alive of the hold lease (which may
//! never come: the operator may die first).
//!
//! Faults: a read is answered at any later moment or never, an operator pauses between
//! any two of its requests, clients crash or pause for any time (a client that takes
//! no step), a leader changes. Times are whole seconds kept as ages (capped where they
//! stop mattering), so the state space is finite and every run is explored to its
//! end; a read's trust is taken to last to the end of the second it ends in (its send
//! and the move it raced may be any part of a second apart). The earlier revoke — the
//! hold lease granted for twice the TTL and a second, the move unguarded — a hold
//! lease a second short, and the holder trusting every keep-alive while its reads
//! hung, are the model's mutations: the checker finds two holders in each.

use std::time::Duration;

/// The model's parameters, in whole seconds (etcd leases have whole-second TTLs).
#[derive(Clone, Debug)]
pub struct Revoke {
    /// The TTL of the clients' shared leases.
    pub ttl: u8,
    /// How long after a read that showed its key a holder trusts it; `None`: for as
    /// long as keep-alives answer.
    pub trusted_after_seen: Option<u8>,
    /// The guard lease's TTL; `None`: the move is not guarded.
    pub guard: Option<u8>,
    /// The hold lease's TTL.
    pub hold: u8,
    /// How long the guard's marker may outlive its lease (the leader's revokes of
    /// ended leases lag), in whole seconds past the one the lease ended in.
    pub linger: u8,
    /// Whether the operator keeps the hold lease alive once, after the move.
    pub keeps_hold: bool,
    /// At most this many acquisitions per client.
    pub acquisitions: u8,
    /// At most this many leader changes.
    pub leader_changes: u8,
}

fn secs(d: Duration) -> u8 {
    u8::try_from(d.as_secs()).unwrap_or(u8::MAX)
}

/// The guard lease's id (the clients' shared leases are 0 and 1).
const GUARD: u8 = 2;
/// The hold lease's id.
const HOLD: u8 = 3;

impl Revoke {
    /// The adapter's decisions, on leases of two seconds.
    #[must_use]
    pub fn adapter() -> Self {
        let ttl = Duration::from_secs(2);
        let guard = dlock_etcd::decisions::revoke_guard(ttl);
        let trust = dlock_etcd::decisions::trusted_after_seen(ttl);
        let hold = dlock_etcd::decisions::revoke_hold(guard, ttl);
        // the slack: the marker may linger that long (one second of it is the
        // rounding, below)
        let slack = secs(hold).saturating_sub(secs(guard) + secs(trust));
        Self {
            ttl: secs(ttl),
            trusted_after_seen: Some(secs(trust)),
            guard: Some(secs(guard)),
            hold: secs(hold),
            linger: slack.saturating_sub(1),
            keeps_hold: true,
            acquisitions: 1,
            leader_changes: 1,
        }
    }

    /// The same with `acquisitions` per client and `leader_changes`.
    #[must_use]
    pub fn bounded(self, acquisitions: u8, leader_changes: u8) -> Self {
        Self {
            acquisitions,
            leader_changes,
            ..self
        }
    }

    /// The earlier revoke: the hold lease granted for twice the TTL and a second, the
    /// move unguarded (an operator paused between the grant and the move moves the key
    /// onto a lease that is nearly over).
    #[must_use]
    pub fn unguarded(self) -> Self {
        Self {
            guard: None,
            hold: 2 * self.ttl + 1,
            keeps_hold: false,
            ..self
        }
    }

    /// The earlier holder: every keep-alive trusted, whether or not a read of its
    /// lease's keys answered since (a holder whose reads hang keeps a revoked lock).
    #[must_use]
    pub fn trusting_every_keep_alive(self) -> Self {
        Self {
            trusted_after_seen: None,
            ..self
        }
    }

    /// A hold lease a second short of the guard, the trust and the slack, and an
    /// operator that dies before its keep-alive: a marker lingering its longest lets
    /// a late move leave less than the holder's trust.
    #[must_use]
    pub fn a_second_short(self) -> Self {
        Self {
            hold: self.hold - 1,
            keeps_hold: false,
            ..self
        }
    }

    /// Ages stop mattering here: past the trust (and the second a read's send time
    /// may have had left) a read is not trusted.
    fn seen_cap(&self) -> u8 {
        self.trusted_after_seen.map_or(0, |t| t + 1)
    }
}

/// A client's place (a crash is a client that takes no more steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No key.
    Idle,
    /// A key in the queue behind another.
    Waiting,
    /// The head of the queue, told so.
    Holding,
}

/// One client. Its shared lease's id is its index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    phase: Phase,
    /// Whether it takes its lease to be alive (it learns otherwise from a keep-alive).
    leased: bool,
    /// Seconds since the last answered keep-alive was sent (capped at the TTL).
    refreshed: u8,
    /// Its key's create revision (0: none).
    key: u8,
    /// Seconds since the last read that showed its key was sent, or the create was
    /// (capped at the trust).
    seen: u8,
    /// A read of the lease's keys in flight: seconds since it was sent.
    read: Option<u8>,
    acquisitions: u8,
}

/// A key on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The client's index, or `None` for the operator's marker.
    client: Option<u8>,
    rev: u8,
    lease: u8,
}

/// Where the operator's revoke is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Not begun.
    Idle,
    /// Read the head (its create revision); the guard lease granted.
    Guarded(u8),
    /// The marker is on the guard lease.
    Marked(u8),
    /// The hold lease granted.
    Holding(u8),
    /// The move landed; the hold lease's keep-alive is next (or never: the operator
    /// may die first).
    Moved,
    /// The keep-alive landed, or the move was refused.
    Done,
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    rev: u8,
    /// Live leases: id, seconds left, TTL.
    leases: Vec<(u8, u8, u8)>,
    keys: Vec<Key>,
    clients: [Client; 2],
    operator: Operator,
    /// The token of the holder the operator revoked (0: none yet).
    revoked: u8,
    leader_changes: u8,
    highest_token: u8,
    backwards: bool,
    /// Seconds since the guard lease ended while its marker is still there.
    marker_lingers: Option<u8>,
    /// The hold lease ended with the revoked key on it.
    hold_ended: bool,
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A second passes; leases past their TTL end with their keys.
    Tick,
    /// A client is granted a new shared lease.
    Grant(u8),
    /// A client puts its key on its lease (one txn: taken if no key is ahead).
    Acquire(u8),
    /// A waiter's predecessor is gone: it is the head now.
    Wake(u8),
    /// A client's keep-alive (one that lands later only ends its lease later, and is
    /// trusted from when it was sent: no worse than this).
    KeepAlive(u8),
    /// A client sends a read of its lease's keys.
    SendRead(u8),
    /// The read is served and answered.
    ReadLands(u8),
    /// A client deletes its key.
    Release(u8),
    /// The operator's next step.
    Operator,
    /// The leader revokes the ended guard lease: its marker goes.
    MarkerGone,
    /// A new leader extends every lease to a full TTL.
    LeaderChange,
}

mod steps;
