//! What can happen at each step of the etcd revoke model: the server's lease ends and
//! the leader's revokes, the clients' requests, the operator's revoke, and the
//! properties checked.

use stateright::{Model, Property};

use super::{Action, Client, GUARD, HOLD, Key, Operator, Phase, Revoke, State};

impl Revoke {
    /// Whether client `i` may trust its lock at some instant of the current second. A
    /// keep-alive's trust and its lease's end count from the same instant; a read's
    /// send and the move it raced are apart by any part of a second, so its trust is
    /// taken to run to the end of the second it ends in.
    fn believes(&self, s: &State, i: usize) -> bool {
        let c = &s.clients[i];
        c.phase == Phase::Holding
            && c.refreshed < self.ttl
            && self.trusted_after_seen.is_none_or(|t| c.seen <= t)
    }

    fn head(s: &State) -> Option<Key> {
        s.keys
            .iter()
            .filter(|k| k.client.is_some())
            .min_by_key(|k| k.rev)
            .copied()
    }

    fn lease_alive(s: &State, id: u8) -> bool {
        s.leases.iter().any(|l| l.0 == id)
    }

    fn grant(s: &mut State, id: u8, ttl: u8) {
        s.leases.retain(|l| l.0 != id);
        s.leases.push((id, ttl, ttl));
        s.leases.sort_unstable();
    }

    fn holds(s: &mut State, i: usize) {
        let c = &mut s.clients[i];
        c.phase = Phase::Holding;
        s.backwards |= c.key <= s.highest_token;
        s.highest_token = s.highest_token.max(c.key);
    }

    fn let_go(s: &mut State, i: usize) {
        let c = &mut s.clients[i];
        let key = c.key;
        s.keys
            .retain(|k| !(k.client == Some(i as u8) && k.rev == key));
        c.phase = Phase::Idle;
        c.key = 0;
        c.read = None;
    }

    fn operate(&self, s: &mut State) {
        s.operator = match s.operator {
            Operator::Idle => {
                let Some(head) = Self::head(s).filter(|k| k.lease < GUARD) else {
                    return;
                };
                match self.guard {
                    Some(guard) => {
                        Self::grant(s, GUARD, guard);
                        Operator::Guarded(head.rev)
                    }
                    None => {
                        Self::grant(s, HOLD, self.hold);
                        Operator::Holding(head.rev)
                    }
                }
            }
            Operator::Guarded(rev) => {
                if Self::lease_alive(s, GUARD) {
                    s.rev += 1;
                    s.keys.push(Key {
                        client: None,
                        rev: s.rev,
                        lease: GUARD,
                    });
                    Operator::Marked(rev)
                } else {
                    Operator::Done // the put fails: nothing moved
                }
            }
            Operator::Marked(rev) => {
                Self::grant(s, HOLD, self.hold);
                Operator::Holding(rev)
            }
            Operator::Holding(rev) => {
                let marked = self.guard.is_none() || s.keys.iter().any(|k| k.client.is_none());
                let hold_alive = Self::lease_alive(s, HOLD);
                // guarded by the key's create revision and lease (still the holder's)
                if let Some(k) = s
                    .keys
                    .iter_mut()
                    .find(|k| k.client.is_some() && k.rev == rev && k.lease < GUARD)
                    .filter(|_| marked && hold_alive)
                {
                    k.lease = HOLD;
                    s.revoked = rev;
                    Operator::Moved
                } else {
                    Operator::Done
                }
            }
            Operator::Moved => {
                if self.keeps_hold
                    && let Some(l) = s.leases.iter_mut().find(|l| l.0 == HOLD)
                {
                    l.1 = l.2;
                }
                Operator::Done
            }
            Operator::Done => Operator::Done,
        };
    }
}

impl Model for Revoke {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let client = Client {
            phase: Phase::Idle,
            leased: true,
            refreshed: 0,
            key: 0,
            seen: 0,
            read: None,
            acquisitions: 0,
        };
        vec![State {
            rev: 0,
            leases: vec![(0, self.ttl, self.ttl), (1, self.ttl, self.ttl)],
            keys: Vec::new(),
            clients: [client.clone(), client],
            operator: Operator::Idle,
            revoked: 0,
            leader_changes: 0,
            highest_token: 0,
            backwards: false,
            marker_lingers: None,
            hold_ended: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.marker_lingers != Some(self.linger) {
            actions.push(Action::Tick);
        }
        for (i, c) in s.clients.iter().enumerate() {
            let i = i as u8;
            if !c.leased {
                actions.push(Action::Grant(i));
            } else {
                if c.phase == Phase::Idle && c.acquisitions < self.acquisitions {
                    actions.push(Action::Acquire(i));
                }
                actions.push(Action::KeepAlive(i));
            }
            if c.key != 0 {
                actions.push(if c.read.is_none() {
                    Action::SendRead(i)
                } else {
                    Action::ReadLands(i)
                });
                actions.push(Action::Release(i));
            }
            let queued = s.keys.iter().any(|k| k.client == Some(i) && k.rev == c.key);
            let ahead = s.keys.iter().any(|k| k.client.is_some() && k.rev < c.key);
            if c.phase == Phase::Waiting && queued && !ahead {
                actions.push(Action::Wake(i));
            }
        }
        if !matches!(s.operator, Operator::Done) {
            actions.push(Action::Operator);
        }
        if s.marker_lingers.is_some() {
            actions.push(Action::MarkerGone);
        }
        if s.leader_changes < self.leader_changes {
            actions.push(Action::LeaderChange);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                for l in &mut s.leases {
                    l.1 -= 1;
                }
                let ended: Vec<u8> = s.leases.iter().filter(|l| l.1 == 0).map(|l| l.0).collect();
                s.leases.retain(|l| l.1 > 0);
                // the leader revokes an ended lease's keys; the guard's marker goes at
                // any moment up to `linger` later (MarkerGone)
                s.marker_lingers = s.marker_lingers.map(|l| l + 1);
                if ended.contains(&GUARD) && s.keys.iter().any(|k| k.lease == GUARD) {
                    s.marker_lingers = Some(0);
                }
                s.hold_ended |= ended.contains(&HOLD) && s.keys.iter().any(|k| k.lease == HOLD);
                s.keys
                    .retain(|k| k.lease == GUARD || !ended.contains(&k.lease));
                let cap = self.seen_cap();
                for c in &mut s.clients {
                    c.refreshed = (c.refreshed + 1).min(self.ttl);
                    c.seen = (c.seen + 1).min(cap);
                    c.read = c.read.map(|r| (r + 1).min(cap));
                }
            }
            Action::Grant(i) => {
                Self::grant(&mut s, i, self.ttl);
                let c = &mut s.clients[usize::from(i)];
                c.leased = true;
                c.refreshed = 0;
            }
            Action::Acquire(i) => {
                let i = usize::from(i);
                if !Self::lease_alive(&s, i as u8) {
                    s.clients[i].leased = false; // the txn fails: lease not found
                    return Some(s);
                }
                s.rev += 1;
                let ahead = Self::head(&s).is_some();
                s.keys.push(Key {
                    client: Some(i as u8),
                    rev: s.rev,
                    lease: i as u8,
                });
                let c = &mut s.clients[i];
                c.key = s.rev;
                c.seen = 0;
                c.acquisitions += 1;
                c.phase = Phase::Waiting;
                if !ahead {
                    Self::holds(&mut s, i);
                }
            }
            Action::Wake(i) => Self::holds(&mut s, usize::from(i)),
            Action::KeepAlive(i) => {
                if let Some(l) = s.leases.iter_mut().find(|l| l.0 == i) {
                    l.1 = l.2;
                    s.clients[usize::from(i)].refreshed = 0;
                } else {
                    // lease not found: every key on it is gone
                    let i = usize::from(i);
                    s.clients[i].leased = false;
                    if s.clients[i].key != 0 {
                        Self::let_go(&mut s, i);
                    }
                }
            }
            Action::SendRead(i) => s.clients[usize::from(i)].read = Some(0),
            Action::ReadLands(i) => {
                let i = usize::from(i);
                let sent = s.clients[i].read.take()?;
                let key = s.clients[i].key;
                let attached = s
                    .keys
                    .iter()
                    .any(|k| k.client == Some(i as u8) && k.rev == key && k.lease == i as u8);
                if attached {
                    let c = &mut s.clients[i];
                    c.seen = c.seen.min(sent);
                } else {
                    Self::let_go(&mut s, i);
                }
            }
            Action::Release(i) => Self::let_go(&mut s, usize::from(i)),
            Action::Operator => self.operate(&mut s),
            Action::MarkerGone => {
                s.keys.retain(|k| k.lease != GUARD);
                s.marker_lingers = None;
            }
            Action::LeaderChange => {
                s.leader_changes += 1;
                for l in &mut s.leases {
                    l.1 = l.1.max(l.2);
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // rule 1: never two clients trusting the lock at once
            Property::always("exclusive", |m: &Self, s: &State| {
                !(m.believes(s, 0) && m.believes(s, 1))
            }),
            // rule 4: each new holder's token is above every earlier one
            Property::always("tokens strictly increase", |_, s: &State| !s.backwards),
            // not vacuous: a revoked holder's successor does get the lock, also when
            // the revoked one never let go and the hold lease ran out
            Property::sometimes("the next in line holds after a revoke", |m, s: &State| {
                s.revoked > 0 && (0..2).any(|i| m.believes(s, i) && s.clients[i].key > s.revoked)
            }),
            Property::sometimes(
                "the next in line holds once the hold lease ran out",
                |m, s: &State| {
                    s.hold_ended && (0..2).any(|i| m.believes(s, i) && s.clients[i].key > s.revoked)
                },
            ),
        ]
    }
}
