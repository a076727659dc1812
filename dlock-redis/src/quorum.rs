//! Redlock's rounds: one operation on every node at once, counted against the quorum;
//! the acquisition round with its fencing settlement and undo.

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

    /// One acquisition round on every node: a quorum of grants within the validity
    /// window, the counters settled at the winning token, or everything undone.
    pub(crate) async fn round(
        &self,
        keys: &Keys,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Claim, LockError> {
        let sent = Instant::now();
        let proposal = proposed_token();
        let (k, o) = (keys.clone(), owner.as_str().to_owned());
        let results = self
            .on_all(move |n| {
                let (k, o) = (k.clone(), o.clone());
                async move { n.acquire(&k, &o, ttl, proposal).await }
            })
            .await;
        let mut tokens = Vec::new();
        let mut holder_pttl: Option<Duration> = None;
        let mut failures = 0;
        let mut last_error = None;
        for r in results {
            match r {
                Ok(Claim::Taken(t)) => tokens.push(t),
                Ok(Claim::Held(pttl)) => {
                    holder_pttl = match (holder_pttl, pttl) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(e) => {
                    failures += 1;
                    last_error = Some(e);
                }
            }
        }
        if tokens.len() >= self.quorum() {
            let token = tokens.iter().copied().max().unwrap_or(FencingToken::new(0));
            // A quorum of counters must stand at `token` or above. The nodes that answered
            // `token` already do; only when they are too few does a second round raise
            // the others (counters in step, the usual case, cost no second round).
            let at_token = tokens.iter().filter(|t| **t == token).count();
            let settled = if at_token >= self.quorum() {
                at_token
            } else {
                let k = keys.clone();
                self.on_all(move |n| {
                    let k = k.clone();
                    async move { n.raise_fence(&k, token.get()).await }
                })
                .await
                .into_iter()
                .filter(Result::is_ok)
                .count()
            };
            // still within the validity window (ttl − elapsed − drift)?
            let in_time = sent.elapsed() + drift_margin(ttl) < ttl;
            if settled >= self.quorum() && in_time {
                return Ok(Claim::Taken(token));
            }
            self.undo(keys, owner).await;
            return Ok(Claim::Held(Some(Duration::ZERO)));
        }
        if !tokens.is_empty() || failures > 0 {
            self.undo(keys, owner).await;
        }
        if failures > self.nodes.len() - self.quorum() {
            return Err(self.quorum_unreachable(failures, last_error));
        }
        Ok(Claim::Held(holder_pttl))
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

/// A token every node can give: the client's clock in µs plus a second, ahead of each
/// node's own clock (the script's lower bound) by more than clock skew and latency. So
/// nodes whose counters are in step answer the same token, and the round needs no
/// second one to settle them (a node whose counter is ahead answers its own, and the
/// settling round raises the others as before). Tokens only need to grow: a proposal
/// never lowers one. A node ignores a proposal more than 60 s ahead of its own clock
/// (a client whose time of day jumped ahead); so does a node whose clock lags by more,
/// which then answers a token of its own and costs the settling round.
fn proposed_token() -> u64 {
    const AHEAD: Duration = Duration::from_secs(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from((now + AHEAD).as_micros()).unwrap_or(u64::MAX)
}
