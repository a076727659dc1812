//! Redis (one server): the FIFO queue and the grant a release sends the oldest waiter
//! on its own channel, taken as the lock from the message alone.
//!
//! The server runs the queue scripts (`dlock-redis/src/queue.rs`) as written there: an
//! attempt on a lock it holds refreshes it; on a free one (released, or expired) it
//! takes it when nobody queues or it is the head, else hands it to the head — the next
//! token, the head's TTL, a message on the head's channel — and queues; on a held one it
//! queues. A release, or a waiter leaving, hands the lock on the same way. The
//! counter the "queued" answer carries is the server's then.
//!
//! The waiter's side is core's rule, called as the adapter calls it:
//! [`kept_after_queued`](dlock_core::backend::grants::kept_after_queued) when an attempt is answered "queued", [`taken_grant`] when it
//! takes a message as the lock — its token above the last queued answer's counter, the
//! lease dated from that attempt's sending, and only while that leaves most of the TTL.
//!
//! Faults: every request, reply and message may be delayed past any other, lost, or
//! (a message) delivered twice; a client may stop trusting and release, or give up
//! waiting (a crash is the same with its last request lost, or no request at all: a
//! holder that crashed only stops trusting, which no property can tell from a pause); its clock runs at the server's rate (one server: no
//! skew to speak of, the drift margin is the adapters' and not modelled).
//!
//! Properties: no two clients trust a lease at once; a token trusted later is never
//! below one trusted before.
//!
//! Left out: the counter never resets (its retention running out, a restart), so the
//! rule's other clause — a message that arrived before the queued attempt went out is
//! dropped — decides nothing here (the token clause already does); a release compares
//! owner and token (the script compares the owner); waiters' deadlines and the skipping
//! of dead heads, renewals and `try_acquire` — liveness more than safety.

use dlock_core::backend::grants::taken_grant;

mod steps;

/// How a waiter decides to take a kept message as the lock: its last queued answer
/// (sent, counter), the message kept (token, arrival), now, and how fresh the attempt
/// must be; the token and the moment its lease counts from.
pub type TakeRule = fn(Option<(u64, u64)>, Option<(u64, u64)>, u64, u64) -> Option<(u64, u64)>;

/// Core's rule, as `GrantSlots::take` applies it.
#[must_use]
pub fn core_rule(
    queued: Option<(u64, u64)>,
    granted: Option<(u64, u64)>,
    now: u64,
    fresh_for: u64,
) -> Option<(u64, u64)> {
    taken_grant(queued, granted.map(|(t, _)| t), |since| {
        now - since < fresh_for
    })
}

/// A mutation: any message is taken, whatever the counter (a grant from an earlier
/// wait passes).
#[must_use]
pub fn any_token(
    queued: Option<(u64, u64)>,
    granted: Option<(u64, u64)>,
    now: u64,
    fresh_for: u64,
) -> Option<(u64, u64)> {
    let (since, _) = queued?;
    let (token, _) = granted?;
    (now - since < fresh_for).then_some((token, since))
}

/// A mutation: the lease counted from the message's arrival (a delayed message
/// outlives the grant).
#[must_use]
pub fn dated_by_arrival(
    queued: Option<(u64, u64)>,
    granted: Option<(u64, u64)>,
    now: u64,
    fresh_for: u64,
) -> Option<(u64, u64)> {
    let (token, _) = core_rule(queued, granted, now, fresh_for)?;
    granted.map(|(_, arrived)| (token, arrived))
}

/// The model's parameters.
#[derive(Clone)]
pub struct RedisGrants {
    /// The waiter's rule under test.
    pub take: TakeRule,
    /// Clients.
    pub clients: u8,
    /// Lease TTL (ticks).
    pub ttl: u64,
    /// How fresh a queued attempt must be for its grant to be taken from the message.
    pub fresh_for: u64,
    /// Nothing happens after this tick.
    pub horizon: u64,
    /// Attempts (first ones and retries) in all.
    pub attempts: u8,
    /// Losses and duplicates of requests, replies and messages, in all.
    pub faults: u8,
}

impl RedisGrants {
    /// Core's rule: two clients, a lease of three ticks.
    #[must_use]
    pub fn adapter() -> Self {
        Self {
            take: core_rule,
            clients: 2,
            ttl: 3,
            fresh_for: 2,
            horizon: 5,
            attempts: 3,
            faults: 1,
        }
    }

    /// Deeper: another attempt, without lost requests or replies (35 M states).
    #[must_use]
    pub fn deep(self) -> Self {
        Self {
            attempts: 4,
            faults: 0,
            ..self
        }
    }

    /// With another rule for taking a message.
    #[must_use]
    pub fn with(self, take: TakeRule) -> Self {
        Self { take, ..self }
    }
}

/// An acquisition's owner id: the client and which of its acquisitions (each has its
/// own id, so its own queue entry, replies and grant channel).
pub type Owner = (u8, u8);

/// What travels: to the server, back, and on a waiter's channel. Each carries the
/// acquisition's `owner` id; `sent` is when an attempt went out, `token` a lease's
/// fencing token, `counter` the server's token counter when it answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // the fields, named once above
pub enum Net {
    /// An attempt.
    Attempt { owner: Owner, sent: u64 },
    /// A release of the lease with this token.
    Release { owner: Owner, token: u64 },
    /// A waiter leaving the queue.
    Leave { owner: Owner },
    /// The answer to an attempt: taken, with the lease's token.
    Taken { owner: Owner, sent: u64, token: u64 },
    /// The answer to an attempt: queued.
    Queued {
        owner: Owner,
        sent: u64,
        counter: u64,
    },
    /// A grant on the waiter's channel.
    Grant { owner: Owner, token: u64 },
}

/// A client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// Not acquiring.
    Idle,
    /// Waiting.
    Waiting {
        /// Its last queued answer: when that attempt was sent, the counter it carried.
        queued: Option<(u64, u64)>,
        /// The grant message it keeps: its token, when it arrived.
        granted: Option<(u64, u64)>,
    },
    /// Trusting a lease.
    Holding {
        /// The lease's token.
        token: u64,
        /// The tick its trust ends.
        until: u64,
    },
}

/// One state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: u64,
    /// The lock key: holder, expiry, token.
    lock: Option<(Owner, u64, u64)>,
    counter: u64,
    queue: Vec<Owner>,
    clients: Vec<Client>,
    /// Each client's current acquisition.
    episodes: Vec<u8>,
    /// Each client's requests in flight, in the order its connection carries them.
    outbox: Vec<Vec<Net>>,
    /// Replies and grant messages in flight: the client's tasks may see them in any
    /// order (a reply wakes the attempt's future, a message the subscription's task).
    net: Vec<Net>,
    attempts: u8,
    faults: u8,
    /// The highest token a client trusted so far.
    trusted: u64,
    backwards: bool,
    overlap: bool,
    taken_from_message: bool,
}

/// What can happen next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time passes.
    Tick,
    /// A client sends an attempt (its first, or again).
    Attempt(u8),
    /// A waiter takes its kept message as the lock.
    TakeMessage(u8),
    /// A waiter gives up: it leaves the queue.
    GiveUp(u8),
    /// A holder releases.
    Release(u8),
    /// The server runs the oldest request in flight from this client.
    Serve(u8),
    /// That request is lost (its connection broke).
    LoseRequest(u8),
    /// The reply or message at this index arrives at its client.
    Deliver(usize),
    /// It is lost.
    Lose(usize),
    /// A message arrives and stays in flight (a duplicate).
    Duplicate(usize),
}

impl State {
    fn send(&mut self, item: Net) {
        self.net.push(item);
        self.net.sort();
    }

    fn request(&mut self, client: u8, item: Net) {
        self.outbox[usize::from(client)].push(item);
    }

    /// The lock is free now (never taken, released, or expired).
    fn free(&self) -> bool {
        self.lock.is_none_or(|(_, expires, _)| expires <= self.now)
    }

    /// Hands a free lock to the head of the queue, if any (a message on its channel).
    fn hand_to_head(&mut self, ttl: u64) {
        if self.queue.is_empty() {
            return;
        }
        let head = self.queue.remove(0);
        self.counter += 1;
        self.lock = Some((head, self.now + ttl, self.counter));
        let token = self.counter;
        self.send(Net::Grant { owner: head, token });
    }

    fn join(&mut self, owner: Owner) {
        if !self.queue.contains(&owner) {
            self.queue.push(owner);
        }
    }

    /// The client's state, if `owner` is its current acquisition (a reply or message
    /// for an acquisition that ended finds no one).
    fn current(&mut self, owner: Owner) -> Option<&mut Client> {
        let (client, episode) = (usize::from(owner.0), owner.1);
        (self.episodes[client] == episode).then(|| &mut self.clients[client])
    }

    fn owner(&self, client: u8) -> Owner {
        (client, self.episodes[usize::from(client)])
    }

    /// A client starts trusting a lease.
    fn trust(&mut self, client: u8, token: u64, until: u64) {
        if until <= self.now {
            return;
        }
        self.backwards |= token < self.trusted;
        self.trusted = self.trusted.max(token);
        self.clients[usize::from(client)] = Client::Holding { token, until };
        let now = self.now;
        self.overlap |= self.clients.iter().enumerate().any(|(i, c)| {
            i != usize::from(client) && matches!(c, Client::Holding { until, .. } if *until > now)
        });
    }
}
