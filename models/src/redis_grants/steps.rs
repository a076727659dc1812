//! What can happen in the Redis grants model: the server running the queue scripts,
//! a client receiving replies and messages, the checker's choices, and the properties.

use dlock_core::backend::grants::kept_after_queued;
use stateright::{Model, Property};

use super::{Action, Client, Net, RedisGrants, State};

impl RedisGrants {
    /// The server runs a request.
    fn serve(&self, s: &mut State, item: &Net) {
        match *item {
            Net::Attempt { owner, sent } => {
                let reply = match s.lock {
                    Some((holder, expires, token)) if holder == owner && expires > s.now => {
                        s.lock = Some((holder, s.now + self.ttl, token));
                        Net::Taken { owner, sent, token }
                    }
                    _ if s.free() && s.queue.first().is_none_or(|&h| h == owner) => {
                        s.queue.retain(|&o| o != owner);
                        s.counter += 1;
                        s.lock = Some((owner, s.now + self.ttl, s.counter));
                        let token = s.counter;
                        Net::Taken { owner, sent, token }
                    }
                    _ => {
                        if s.free() {
                            s.hand_to_head(self.ttl);
                        }
                        s.join(owner);
                        let counter = s.counter;
                        Net::Queued {
                            owner,
                            sent,
                            counter,
                        }
                    }
                };
                s.send(reply);
            }
            Net::Release { owner, token }
                if s.lock
                    .is_some_and(|(h, e, t)| h == owner && t == token && e > s.now) =>
            {
                s.lock = None;
                s.hand_to_head(self.ttl);
            }
            Net::Leave { owner } => {
                s.queue.retain(|&o| o != owner);
                // a grant it never heard of is handed on
                if s.lock.is_some_and(|(h, e, _)| h == owner && e > s.now) {
                    s.lock = None;
                    s.hand_to_head(self.ttl);
                }
            }
            _ => {}
        }
    }

    /// A client gets a reply or a message.
    fn receive(&self, s: &mut State, item: &Net) {
        match *item {
            Net::Taken { owner, sent, token } => {
                if matches!(s.current(owner), Some(Client::Waiting { .. })) {
                    s.trust(owner.0, token, sent + self.ttl);
                }
            }
            Net::Queued {
                owner,
                sent,
                counter,
            } => {
                if let Some(Client::Waiting { queued, granted }) = s.current(owner) {
                    *queued = Some((sent, counter));
                    *granted = kept_after_queued(*granted, &sent, counter);
                }
            }
            Net::Grant { owner, token } => {
                let now = s.now;
                if let Some(Client::Waiting { granted, .. }) = s.current(owner)
                    && granted.is_none_or(|(t, _)| t < token)
                {
                    *granted = Some((token, now));
                }
            }
            _ => {}
        }
    }
}

impl Model for RedisGrants {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            lock: None,
            counter: 0,
            queue: Vec::new(),
            clients: vec![Client::Idle; usize::from(self.clients)],
            episodes: vec![0; usize::from(self.clients)],
            outbox: vec![Vec::new(); usize::from(self.clients)],
            net: Vec::new(),
            attempts: 0,
            faults: 0,
            trusted: 0,
            backwards: false,
            overlap: false,
            taken_from_message: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now < self.horizon {
            actions.push(Action::Tick);
        }
        for c in 0..self.clients {
            let client = &s.clients[usize::from(c)];
            if !matches!(client, Client::Holding { .. }) && s.attempts < self.attempts {
                actions.push(Action::Attempt(c));
            }
            match client {
                Client::Waiting { queued, granted } => {
                    if (self.take)(*queued, *granted, s.now, self.fresh_for).is_some() {
                        actions.push(Action::TakeMessage(c));
                    }
                    actions.push(Action::GiveUp(c));
                }
                Client::Holding { .. } => {
                    actions.push(Action::Release(c));
                }
                Client::Idle => {}
            }
        }
        for c in 0..self.clients {
            if !s.outbox[usize::from(c)].is_empty() {
                actions.push(Action::Serve(c));
                if s.faults < self.faults {
                    actions.push(Action::LoseRequest(c));
                }
            }
        }
        for i in 0..s.net.len() {
            if i > 0 && s.net[i] == s.net[i - 1] {
                continue;
            }
            actions.push(Action::Deliver(i));
            if s.faults < self.faults {
                actions.push(Action::Lose(i));
                if matches!(s.net[i], Net::Grant { .. }) {
                    actions.push(Action::Duplicate(i));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += 1;
                // a lease trusted to its end is trusted no more
                let now = s.now;
                for c in &mut s.clients {
                    if matches!(c, Client::Holding { until, .. } if *until <= now) {
                        *c = Client::Idle;
                    }
                }
            }
            Action::Attempt(c) => {
                if s.clients[usize::from(c)] == Client::Idle {
                    // a new acquisition: a new owner id
                    s.episodes[usize::from(c)] += 1;
                    s.clients[usize::from(c)] = Client::Waiting {
                        queued: None,
                        granted: None,
                    };
                }
                s.attempts += 1;
                let (owner, sent) = (s.owner(c), s.now);
                s.request(c, Net::Attempt { owner, sent });
            }
            Action::TakeMessage(c) => {
                let Client::Waiting { queued, granted } = s.clients[usize::from(c)] else {
                    return None;
                };
                let (token, since) = (self.take)(queued, granted, s.now, self.fresh_for)?;
                s.taken_from_message = true;
                s.trust(c, token, since + self.ttl);
            }
            Action::GiveUp(c) => {
                s.clients[usize::from(c)] = Client::Idle;
                let owner = s.owner(c);
                s.request(c, Net::Leave { owner });
            }
            Action::Release(c) => {
                let Client::Holding { token, .. } = s.clients[usize::from(c)] else {
                    return None;
                };
                s.clients[usize::from(c)] = Client::Idle;
                let owner = s.owner(c);
                s.request(c, Net::Release { owner, token });
            }

            Action::Deliver(i) => {
                let item = s.net.remove(i);
                self.receive(&mut s, &item);
            }
            Action::Serve(c) => {
                let item = s.outbox[usize::from(c)].remove(0);
                self.serve(&mut s, &item);
            }
            Action::LoseRequest(c) => {
                s.outbox[usize::from(c)].remove(0);
                s.faults += 1;
            }
            Action::Lose(i) => {
                s.net.remove(i);
                s.faults += 1;
            }
            Action::Duplicate(i) => {
                let item = s.net[i].clone();
                s.faults += 1;
                self.receive(&mut s, &item);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("no two clients trust a lease at once", |_, s: &State| {
                !s.overlap
            }),
            Property::always("a token trusted later is never lower", |_, s: &State| {
                !s.backwards
            }),
            Property::sometimes("a grant is taken from its message", |_, s: &State| {
                s.taken_from_message
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.now <= self.horizon
    }
}
