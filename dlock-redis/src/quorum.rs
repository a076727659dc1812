//! Redlock's rounds: one operation on every node at once, counted against the quorum;
//! the acquisition round, its proposals and undo.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::{Claim, Subscription};
use dlock_core::{FencingToken, LockError, OwnerId, drift_margin};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::keys::Keys;
use crate::node::Node;
use crate::redlock::Redlock;

/// Tally of one round over all nodes.
pub(crate) struct Round<T> {
    pub ok: Vec<T>,
    pub refused: usize,
    pub failed: Option<LockError>,
    pub failures: usize,
}

impl Redlock {
    /// Runs `op` on every node at once and collects the answers in node order.
    pub(crate) async fn on_all<T, F, Fut>(&self, op: F) -> Vec<Result<T, LockError>>
    where
        T: Send + 'static,
        F: Fn(Arc<Node>) -> Fut,
        Fut: Future<Output = Result<T, LockError>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let fut = op(Arc::clone(node));
            set.spawn(async move { (i, fut.await) });
        }
        let mut out: Vec<Option<Result<T, LockError>>> =
            (0..self.nodes.len()).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or(Err(LockError::transient("node task failed"))))
            .collect()
    }

    /// Counts a round of boolean answers (`false` = refused).
    pub(crate) async fn tally_bool<F, Fut>(&self, op: F) -> Round<()>
    where
        F: Fn(Arc<Node>) -> Fut,
        Fut: Future<Output = Result<bool, LockError>> + Send + 'static,
    {
        let mut round = Round {
            ok: Vec::new(),
            refused: 0,
            failed: None,
            failures: 0,
        };
        for r in self.on_all(op).await {
            match r {
                Ok(true) => round.ok.push(()),
                Ok(false) => round.refused += 1,
                Err(e) => {
                    round.failures += 1;
                    round.failed = Some(e);
                }
            }
        }
        round
    }

    pub(crate) async fn undo(&self, keys: &Keys, owner: &OwnerId) {
        let (keys, owner) = (keys.clone(), owner.as_str().to_owned());
        let _ = self
            .on_all(move |n| {
                let (keys, owner) = (keys.clone(), owner.clone());
                async move { n.release(&keys, &owner).await }
            })
            .await;
    }

    pub(crate) fn quorum_unreachable(&self, failures: usize, last: Option<LockError>) -> LockError {
        let detail = last.map(|e| e.to_string()).unwrap_or_default();
        LockError::transient(format!(
            "Redlock: {failures} of {} nodes failed, quorum {} is out of reach ({detail})",
            self.nodes.len(),
            self.quorum()
        ))
    }

    /// One acquisition on every node: a quorum of grants at one proposed token within
    /// the validity window, or everything undone. Nodes that refuse the proposal (their
    /// counter or clock is past it) name their counter and clock; when they could have
    /// made up the quorum, the round proposes again above them all, at most
    /// [`PROPOSALS`] times.
    pub(crate) async fn round(
        &self,
        keys: &Keys,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Claim, LockError> {
        let sent = Instant::now();
        let mut proposal = proposed_token();
        // the highest counter a node named: later proposals may run ahead of it
        let mut highest = 0;
        for proposals_left in (0..PROPOSALS).rev() {
            let (k, o) = (keys.clone(), owner.as_str().to_owned());
            let rest = self.opts.restart_delay;
            let results = self
                .on_all(move |n| {
                    let (k, o) = (k.clone(), o.clone());
                    async move { n.propose(&k, &o, (ttl, proposal, highest), rest).await }
                })
                .await;
            let (mut granted, mut refused, mut failures, mut blind) = (0, 0, 0, 0);
            let mut resting = Vec::new();
            let (mut next, mut holder_pttl, mut last_error) = (None, None::<Duration>, None);
            for r in results {
                match r {
                    Ok(Grant::Taken) => granted += 1,
                    Ok(Grant::Refused { counter, clock }) => {
                        refused += 1;
                        highest = highest.max(counter);
                        next = next.max(Some(reproposal(counter, clock)));
                    }
                    Ok(Grant::Held(pttl)) => {
                        holder_pttl = match (holder_pttl, pttl) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    // unavailable for grants, like a node that failed
                    Ok(Grant::Resting(left)) => {
                        failures += 1;
                        resting.push(left);
                    }
                    Ok(Grant::UptimeUnknown) => {
                        failures += 1;
                        blind += 1;
                    }
                    Err(e) => {
                        failures += 1;
                        last_error = Some(e);
                    }
                }
            }
            if blind > 0 {
                last_error = Some(uptime_unknown(blind));
            }
            if let Some(left) = resting.iter().min() {
                last_error = Some(LockError::transient(format!(
                    "{} node(s) restarted less than the restart delay ago and grant nothing \
                     for {left:?} more (Redlock's delayed restart)",
                    resting.len()
                )));
            }
            if granted >= self.quorum() {
                // still within the validity window (ttl − elapsed − drift)?
                if sent.elapsed() + drift_margin(ttl) < ttl {
                    return Ok(Claim::Taken(FencingToken::new(proposal)));
                }
                self.undo(keys, owner).await;
                return Ok(Claim::Held(Some(Duration::ZERO)));
            }
            // a refusing node kept no key of ours: only grants and unknowns to undo
            if granted + failures > 0 {
                self.undo(keys, owner).await;
            }
            // a setting, not an outage: waiting would not mend it
            if blind > self.nodes.len() - self.quorum() {
                return Err(uptime_unknown(blind));
            }
            if failures > self.nodes.len() - self.quorum() {
                return Err(self.quorum_unreachable(failures, last_error));
            }
            match next {
                Some(next) if granted + refused >= self.quorum() && proposals_left > 0 => {
                    proposal = next;
                }
                // proposals used up: the caller's wait tries again at once
                Some(_) if granted + refused >= self.quorum() => {
                    return Ok(Claim::Held(Some(Duration::ZERO)));
                }
                _ => return Ok(Claim::Held(holder_pttl)),
            }
        }
        Ok(Claim::Held(Some(Duration::ZERO)))
    }

    /// One subscription woken by a release on any node.
    pub(crate) async fn subscribe_all(&self, keys: &Keys) -> Option<Subscription> {
        let mut subs = Vec::new();
        for node in self.nodes.iter() {
            if let Ok(s) = node.subscribe(&keys.channel).await {
                subs.push(s);
            }
        }
        (!subs.is_empty()).then(|| Subscription::any_of(subs))
    }
}

/// The error of `n` nodes that grant nothing because they cannot read their uptime.
fn uptime_unknown(n: usize) -> LockError {
    LockError::Config(format!(
        "{n} Redlock node(s) may not run INFO, which the restart delay needs to read their \
         uptime, and grant nothing: allow it (ACL SETUSER <user> +info) or, if every node \
         keeps its data across restarts (appendfsync always), set restart-delay=0s"
    ))
}

/// A node's answer to a Redlock proposal.
pub(crate) enum Grant {
    /// Taken at the proposed token.
    Taken,
    /// Held by another owner, with its time left if the node knows it.
    Held(Option<Duration>),
    /// The proposal was not above the node's counter, or not within its clock (µs)
    /// and [`crate::quorum::MAX_AHEAD_MICROS`] ahead: propose again above both.
    Refused { counter: u64, clock: u64 },
    /// The node restarted less than the restart delay ago and grants nothing for this
    /// long more (see [`crate::scripts::PROPOSE`]).
    Resting(Duration),
    /// The node could not read its uptime (`INFO` denied by its ACL), so it cannot
    /// tell whether it rests: it grants nothing.
    UptimeUnknown,
}

/// How many proposals one acquisition round makes before it lets the caller's wait
/// try again: a second one follows a refusal, a third a race with another client's.
pub const PROPOSALS: usize = 3;

/// The first token a round proposes: the client's clock in µs plus a second, ahead of
/// each node's own clock (the script's lower bound) by more than clock skew and
/// latency. So nodes whose counters are in step all grant it, and a reader finds the
/// same token on every node of the quorum. A node whose counter or clock is past it,
/// or whose clock lags it by more than 60 s (the client's time of day jumped ahead),
/// refuses, and the round proposes again with [`reproposal`].
fn proposed_token() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from((now + AHEAD).as_micros()).unwrap_or(u64::MAX)
}

/// The token to propose after a node refused with its `counter` and `clock` (µs):
/// above the counter, and a second ahead of the node's clock, as the first proposal
/// is of the client's; the highest over the refusing nodes is proposed. It follows the
/// nodes' clocks, not the client's, so a client whose clock is off by more than a
/// second still gets a lock (at a second round's cost), and counters never creep
/// ahead of the nodes' time by more than the one second.
pub fn reproposal(counter: u64, clock: u64) -> u64 {
    let ahead = u64::try_from(AHEAD.as_micros()).unwrap_or(u64::MAX);
    counter.saturating_add(1).max(clock.saturating_add(ahead))
}

/// How far ahead of a clock a proposal is made.
pub const AHEAD: Duration = Duration::from_secs(1);

/// How far past its clock (or the highest counter the round's nodes named) a node
/// takes a proposal (µs): [`AHEAD`] plus a second for clock skew between hosts. A
/// client clock further ahead is refused and the round follows what the nodes named,
/// never the client's clock; so tokens stay within this of the nodes' clocks, however
/// many skewed clients follow each other (the bound is not measured from a node's own
/// counter, which would let each carry it further), and a node resting longer after a
/// restart (see [`crate::options::DEFAULT_RESTART_DELAY`]) comes back below the tokens
/// of clients with true clocks.
pub const MAX_AHEAD_MICROS: u64 = 2_000_000;

impl Node {
    /// Takes the lock for `owner` at exactly the `proposal`ed token, or not at all; a
    /// node up for less than `restart_delay` grants nothing. `highest` is the highest
    /// counter the round's nodes named so far (0 in its first proposal): the node takes
    /// a proposal up to [`MAX_AHEAD_MICROS`] past it or its own clock.
    pub(crate) async fn propose(
        &self,
        keys: &Keys,
        owner: &str,
        (ttl, proposal, highest): (Duration, u64, u64),
        restart_delay: Duration,
    ) -> Result<Grant, LockError> {
        let mut conn = self.conn.clone();
        let (answer, n, clock): (i64, i64, i64) = self
            .run(
                "acquire",
                crate::scripts::PROPOSE
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .arg(owner)
                    .arg(dlock_core::backend::millis_u64(ttl))
                    .arg(proposal)
                    .arg(restart_delay.as_secs_f64().ceil())
                    .arg(MAX_AHEAD_MICROS)
                    .arg(highest)
                    .invoke_async(&mut conn),
            )
            .await?;
        Ok(match answer {
            1 => Grant::Taken,
            2 => Grant::Refused {
                counter: self.token(n)?.get(),
                clock: self.token(clock)?.get(),
            },
            3 => Grant::Resting(Duration::from_millis(u64::try_from(n).unwrap_or(0))),
            4 => Grant::UptimeUnknown,
            _ => Grant::Held(u64::try_from(n).ok().map(Duration::from_millis)),
        })
    }
}
