//! `Redlock`: N independent Redis masters, quorum N/2+1.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{
    AttemptRequest, Backend, Claim, ClaimDriver, Claims, Subscription, WaitPolicy, break_claimed,
    resume_held,
};
use dlock_core::{
    Access, Capabilities, FencingToken, HolderValue, Lease, LockError, LockInfo, LockName, OwnerId,
};
use tokio::time::Instant;

use crate::builder::RedlockBuilder;
use crate::keys::Keys;
use crate::node::Node;
use crate::options::{CAPABILITIES, Options};

/// The Redlock algorithm over N independent Redis masters (no replication between
/// them). Acquire runs the acquire script on every node in parallel with a per-node
/// timeout; it succeeds on a quorum (N/2+1) within the lease's validity
/// (`ttl − elapsed − drift`), and is undone on every node otherwise. Renew and release
/// run on every node; a renewal counts only on a quorum.
///
/// **Fencing tokens are strictly monotonic across holders**: each node has its own
/// counter, and a round proposes one token to every node — the client's clock in µs
/// plus a second. A node grants the lock at exactly that token, and only if it is above
/// its counter, at or above its own clock and at most two seconds past both, or refuses
/// and names counter and clock; the round wins on a quorum of grants, or proposes again
/// above what the refusing nodes named (counters in step — the usual case — need no
/// second proposal; a client whose clock is off pays a second proposal, and its tokens
/// follow the nodes' clocks). Any later quorum overlaps the winning one in at least one
/// node, whose counter is already at the token, so the next token is higher.
///
/// A node that loses its data (no persistence, `appendfsync everysec`, an old snapshot)
/// breaks that overlap: a quorum of it and nodes that missed a grant could grant the
/// name again, or below a token already handed out. So a node grants nothing for the
/// *restart delay* after it starts ([`RedlockBuilder::restart_delay`], default
/// [`crate::DEFAULT_RESTART_DELAY`]: Redlock's delayed restart): by then every lease it
/// forgot has run out (a TTL longer than the delay is refused) and the clocks of the
/// nodes have passed every token it granted (a grant runs at most two seconds past the
/// nodes' clocks, however many clients whose clocks are ahead follow each other: a
/// node measures the bound from its clock, or from the highest counter the round's
/// nodes named, never from its own counter). The assumptions left are the usual ones:
/// the nodes' clocks within a second of each other, none stepping back.
///
/// And since every node of the quorum holds the same token from the moment it grants,
/// `inspect` (and an election's observer) reads the holder's token from any of them: no
/// second round raises it after a reader could have seen it.
///
/// **Safety class**: Redlock's mutual exclusion rests on timing — bounded clock drift
/// between nodes, bounded process pauses and network delays. A paused client can wake
/// after its lease expired believing it still holds the lock. Use it for efficiency;
/// for correctness, make the protected resource check the fencing token.
#[derive(Clone)]
pub struct Redlock {
    pub(crate) nodes: Arc<Vec<Arc<Node>>>,
    pub(crate) opts: Arc<Options>,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redlock")
            .field("nodes", &self.nodes.len())
            .field("prefix", &self.opts.prefix)
            .finish_non_exhaustive()
    }
}

impl Redlock {
    /// Prepares a Redlock over `urls` (`redis://host:port`, one per independent master).
    ///
    /// # Errors
    /// [`LockError::Config`] for no URLs or a malformed one.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(urls: &[&str]) -> Result<Self, LockError> {
        Self::builder(urls).connect().await
    }

    /// A builder for prefix and per-node timeout.
    #[must_use]
    pub fn builder(urls: &[&str]) -> RedlockBuilder {
        RedlockBuilder::new(urls, Duration::from_millis(250))
    }

    /// How many nodes must agree: N/2 + 1.
    #[must_use]
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }
}

#[async_trait]
impl Backend for Redlock {
    type Family = Claims;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let ttl = lease.ttl();
        // a renewal sets the TTL too (a min-hold's linger renews with its own)
        check_ttl_within_restart_delay(ttl, self.opts.restart_delay)?;
        let key: Arc<str> = Keys::lock_key(&self.opts, lease.name()).into();
        let owner: Arc<str> = lease.owner().as_str().into();
        // Queued on every node before waiting on any: no task per node, and each node
        // sends it with the other renewals due now.
        let queued: Vec<_> = self
            .nodes
            .iter()
            .map(|n| n.submit_renew(Arc::clone(&key), Arc::clone(&owner), ttl))
            .collect();
        let (mut ok, mut refused, mut failures, mut failed) = (0, 0, 0, None);
        for q in queued {
            let answer = match q {
                Ok(pending) => pending.answer().await,
                Err(e) => Err(e),
            };
            match answer {
                Ok(true) => ok += 1,
                Ok(false) => refused += 1,
                Err(e) => {
                    failures += 1;
                    failed = Some(e);
                }
            }
        }
        let renewed = lease.renewed(ttl, sent);
        if ok >= self.quorum() && renewed.is_valid() {
            return Ok(renewed);
        }
        if refused > self.nodes.len() - self.quorum() {
            return Err(LockError::lease_lost(lease.name()));
        }
        Err(self.quorum_unreachable(failures, failed))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let keys = Keys {
            // independent masters hold no common queue: waiters wake and try again
            fifo: false,
            ..Keys::new(&self.opts, lease.name())
        };
        let owner = lease.owner().as_str().to_owned();
        let round = self
            .tally_bool(move |n| {
                let (k, o) = (keys.clone(), owner.clone());
                async move { n.release(&k, &o).await }
            })
            .await;
        if round.ok.is_empty() && round.failures == self.nodes.len() {
            return Err(self.quorum_unreachable(round.failures, round.failed));
        }
        Ok(!round.ok.is_empty())
    }

    async fn proclaim(&self, lease: &Lease, value: &HolderValue) -> Result<(), LockError> {
        self.proclaim_on_quorum(lease, value).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let keys = Keys::new(&self.opts, name);
        let results = self
            .on_all(move |n| {
                let k = keys.clone();
                async move { n.inspect(&k).await }
            })
            .await;
        let mut failures = 0;
        let mut last = None;
        // owner -> (nodes holding it, highest counter among them, least time left, the
        // values they hold for it)
        let mut seen: Vec<(String, usize, u64, Duration, Vec<Option<HolderValue>>)> = Vec::new();
        for r in results {
            match r {
                Ok(Some(h)) => match seen.iter_mut().find(|s| s.0 == h.owner) {
                    Some(s) => {
                        s.1 += 1;
                        s.2 = s.2.max(h.token);
                        s.3 = s.3.min(h.pttl);
                        s.4.push(h.proclaimed);
                    }
                    None => seen.push((h.owner, 1, h.token, h.pttl, vec![h.proclaimed])),
                },
                Ok(None) => {}
                Err(e) => {
                    failures += 1;
                    last = Some(e);
                }
            }
        }
        if let Some((owner, _, token, remaining, values)) =
            seen.into_iter().find(|s| s.1 >= self.quorum())
        {
            return Ok(Some(LockInfo {
                owner: OwnerId::from_stored(&owner),
                token: FencingToken::new(token),
                remaining,
                proclaimed: self.agreed(values),
            }));
        }
        if failures > self.nodes.len() - self.quorum() {
            return Err(self.quorum_unreachable(failures, last));
        }
        Ok(None)
    }

    async fn resume(&self, ticket: &dlock_core::Ticket) -> Result<Lease, LockError> {
        resume_held(self, ticket).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        break_claimed(self, name).await
    }

    /// Revoked on a quorum: the holder can renew on a minority at most, and a quorum
    /// keeps the name taken until the revoked keys expire.
    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let keys = Keys::new(&self.opts, name);
        dlock_core::backend::revoke_claimed(self, name, |holder| {
            let keys = keys.clone();
            async move {
                let (owner, mark) = (
                    holder.owner.as_str().to_owned(),
                    holder.owner.revoked().as_str().to_owned(),
                );
                let round = self
                    .tally_bool(move |n| {
                        let (k, o, m) = (keys.clone(), owner.clone(), mark.clone());
                        async move { n.revoke(&k, &o, &m).await }
                    })
                    .await;
                if round.ok.len() < self.quorum() && round.failures > 0 {
                    return Err(self.quorum_unreachable(round.failures, round.failed));
                }
                Ok(round.ok.len() >= self.quorum())
            }
        })
        .await
    }

    /// Each node's findings, whether it rests after a restart, and how far apart the
    /// nodes' clocks are.
    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        Ok(crate::doctor::redlock(&self.nodes, self.opts.restart_delay).await)
    }

    /// The names any node has a lock key for, each inspected on every node: listed when
    /// a quorum agrees on its holder.
    async fn list(&self, prefix: &str) -> Result<Vec<dlock_core::Held>, LockError> {
        let Some(pattern) = crate::keys::scan_pattern(&self.opts, prefix) else {
            return Err(crate::keys::plain_unlisted());
        };
        let mut names = std::collections::BTreeSet::new();
        let mut answered = 0;
        for node in self.nodes.iter() {
            // a node down hides nothing a quorum holds: the others still have its keys
            if let Ok(keys) = node.scan(&pattern).await {
                answered += 1;
                names.extend(
                    keys.iter()
                        .filter_map(|k| crate::keys::name_of(&self.opts, k)),
                );
            }
        }
        if answered < self.quorum() {
            return Err(LockError::transient(
                "list: fewer than a quorum of Redlock nodes answered",
            ));
        }
        let mut held = Vec::new();
        for name in names {
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            if let Some(holder) = Backend::inspect(self, &name).await? {
                held.push(dlock_core::Held::new(name, holder, None));
            }
        }
        Ok(held)
    }

    fn capabilities(&self) -> Capabilities {
        let rest = self.opts.restart_delay;
        CAPABILITIES.with_max_ttl((!rest.is_zero()).then_some(rest))
    }

    fn backend_name(&self) -> &'static str {
        "redlock"
    }
}

/// Acquire is one parallel round (a second one only when a node's counter or clock is
/// past the proposal), release one round, a renewal one script call per node shared with every
/// renewal due on the same tick.
#[async_trait]
impl ClaimDriver for Redlock {
    /// One round. Dropping the caller's future mid-round cannot leave grants behind:
    /// a guard then releases on every node whatever the round won (each node's
    /// connection sends the release after the grant, so it finds it), rather than
    /// leaving it held until its TTL.
    async fn claim(&self, request: &AttemptRequest<'_>) -> Result<Claim, LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        if access != Access::Exclusive {
            return Err(LockError::unsupported(Backend::backend_name(self), access));
        }
        check_ttl_within_restart_delay(ttl, self.opts.restart_delay)?;
        let keys = Keys::for_acquire(&self.opts, name)?;
        let mut undo = UndoOnDrop {
            lock: self.clone(),
            keys: keys.clone(),
            owner: owner.clone(),
            armed: true,
        };
        let outcome = self.round(&keys, owner, ttl).await;
        undo.armed = false;
        outcome
    }

    async fn subscribe(&self, request: &AttemptRequest<'_>) -> Option<Subscription> {
        // wake-up and attempt: a queue on each of independent masters would order the
        // waiters differently on each, and no order would hold on a quorum
        self.subscribe_all(&Keys::new(&self.opts, request.name))
            .await
    }

    fn wait_policy(&self) -> WaitPolicy {
        self.opts.policy
    }
}

/// Refuses a TTL longer than the restart delay (when there is one): a node restarted
/// empty would rest less than a lease it forgot still runs, and could grant the name
/// through a quorum with nodes that missed that lease.
fn check_ttl_within_restart_delay(ttl: Duration, rest: Duration) -> Result<(), LockError> {
    if rest.is_zero() || ttl <= rest {
        return Ok(());
    }
    Err(LockError::InvalidArgument(format!(
        "TTL {} is longer than Redlock's restart delay of {}: a node restarted without its \
         data would grant again before such a lease ran out; raise restart-delay= (URL) or \
         RedlockBuilder::restart_delay above your longest TTL",
        dlock_core::format_duration(ttl),
        dlock_core::format_duration(rest)
    )))
}

/// Releases a round's grants on every node when the round is dropped unfinished.
struct UndoOnDrop {
    lock: Redlock,
    keys: Keys,
    owner: OwnerId,
    armed: bool,
}

impl Drop for UndoOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (lock, keys, owner) = (self.lock.clone(), self.keys.clone(), self.owner.clone());
        dlock_core::spawn_cleanup(async move { lock.undo(&keys, &owner).await });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_longer_than_the_restart_delay_is_refused() {
        let s = Duration::from_secs;
        assert!(check_ttl_within_restart_delay(s(60), s(60)).is_ok());
        assert!(check_ttl_within_restart_delay(s(3600), Duration::ZERO).is_ok());
        let e = check_ttl_within_restart_delay(s(61), s(60)).unwrap_err();
        assert!(matches!(e, LockError::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("restart-delay="), "{e}");
    }
}
