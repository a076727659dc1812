//! `RedisLock`: one Redis server.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{
    AttemptRequest, Backend, Claim, ClaimDriver, Claims, Subscription, WaitPolicy, break_claimed,
    resume_held,
};
use dlock_core::{
    Access, Capabilities, FencingToken, Held, Holding, Lease, LockError, LockInfo, LockName,
    OwnerId, Ticket,
};
use tokio::time::Instant;

use crate::builder::RedisLockBuilder;
use crate::keys::Keys;
use crate::node::Node;
use crate::options::{CAPABILITIES, KeyLayout, Options};
use crate::shared::SharedKeys;

/// A lock on one Redis server: one Lua script per operation (acquire, renew, release
/// each one round trip), a fencing counter per name, and waiters served in order: they
/// queue on the server, and a release hands the lock to the oldest and tells it alone
/// with a pub/sub message on its own channel.
///
/// Safety: as safe as the one server. If it fails over to a replica that missed the
/// last writes, or restarts without persistence, a lock can be granted twice; the
/// fencing token — `max(counter + 1, server clock in µs)`, so a counter restored older
/// cannot repeat a token — keeps such a double grant from corrupting a fenced resource.
#[derive(Clone)]
pub struct RedisLock {
    pub(crate) node: Arc<Node>,
    pub(crate) opts: Arc<Options>,
}

impl std::fmt::Debug for RedisLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLock")
            .field("prefix", &self.opts.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisLock {
    pub(crate) fn new(node: Arc<Node>, opts: Arc<Options>) -> Self {
        Self { node, opts }
    }

    /// Connects to `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS, with
    /// the crate's `tls` feature), or to the master Redis Sentinel names:
    /// `redis-sentinel://[user:password@]s1:26379,s2:26379/mastername[/db]` (the
    /// credentials and database are the master's), or to a Redis Cluster:
    /// `redis-cluster://[user:password@]h1:6379,h2:6379` (any of its nodes; the client
    /// learns the rest and follows `MOVED`/`ASK`). Behind Sentinel the lock follows
    /// the master: a connection error or a `READONLY` answer makes it ask the
    /// sentinels again and move to the master they name. URL parameters `prefix` and
    /// `timeout` are read by dlock.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dlock_core::LockError> {
    /// let locks = dlock_redis::RedisLock::connect(
    ///     "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/locks",
    /// )
    /// .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL, [`LockError::Unavailable`] when the
    /// server cannot be reached.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::builder(url).connect().await
    }

    /// A builder for prefix and timeout.
    #[must_use]
    pub fn builder(url: &str) -> RedisLockBuilder {
        RedisLockBuilder::new(&[url], Duration::from_secs(2))
    }
}

/// One round trip each way (the uncontended path in the fewest): acquire is
/// one script (`SET NX PX … GET` and the fencing clock), release one script (compare
/// owner, `DEL`, hand the lock to the oldest waiter and tell it), a renewal one script
/// call shared with every renewal due on the same tick. Waiters queue on the server and
/// the release grants: FIFO, one message per hand-off (`waiting.rs`, `queue.rs`).
#[async_trait]
impl ClaimDriver for RedisLock {
    async fn claim(&self, request: &AttemptRequest<'_>) -> Result<Claim, LockError> {
        self.attempt(request).await
    }

    async fn subscribe(&self, request: &AttemptRequest<'_>) -> Option<Subscription> {
        self.listen_for_grant(request.name, request.access, request.owner)
            .await
            .inspect_err(|e| tracing::debug!(error = %e, "subscribe failed; polling instead"))
            .ok()
    }

    fn abandon(&self, request: &AttemptRequest<'_>) {
        self.leave_queue(request.name, request.access, request.owner);
    }

    async fn watch(&self, name: &LockName) -> Option<Subscription> {
        let channel = Keys::new(&self.opts, name).channel;
        self.node
            .subscribe(&channel)
            .await
            .inspect_err(|e| tracing::debug!(error = %e, "subscribe failed; polling instead"))
            .ok()
    }

    fn wait_policy(&self) -> WaitPolicy {
        self.opts.policy
    }
}

#[async_trait]
impl Backend for RedisLock {
    type Family = Claims;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let renewed = if lease.access() == Access::Exclusive {
            let key = Keys::lock_key(&self.opts, lease.name()).into();
            let owner = lease.owner().as_str().into();
            self.node
                .submit_renew(key, owner, lease.ttl())?
                .answer()
                .await?
        } else {
            let keys = SharedKeys::new(&self.opts.prefix, lease.name(), lease.access());
            let owner = lease.owner().as_str();
            self.node
                .renew_shared(&keys, lease.access(), owner, lease.token(), lease.ttl())
                .await?
        };
        if renewed {
            Ok(lease.renewed(lease.ttl(), sent))
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        if lease.access() == Access::Exclusive {
            let keys = Keys::new(&self.opts, lease.name());
            return self.node.release(&keys, lease.owner().as_str()).await;
        }
        let keys = SharedKeys::new(&self.opts.prefix, lease.name(), lease.access());
        let owner = lease.owner().as_str();
        self.node
            .release_shared(&keys, lease.access(), owner, lease.token())
            .await
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        let keys = SharedKeys::new(&self.opts.prefix, name, of);
        self.node.holders(&keys).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let keys = Keys::new(&self.opts, name);
        Ok(self.node.inspect(&keys).await?.map(|h| LockInfo {
            owner: OwnerId::from_stored(&h.owner),
            token: FencingToken::new(h.token),
            remaining: h.pttl,
            proclaimed: h.proclaimed,
        }))
    }

    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        dlock_core::backend::proclaimable(self.backend_name(), lease)?;
        let keys = Keys::new(&self.opts, lease.name());
        if self
            .node
            .proclaim(&keys, lease.owner().as_str(), value)
            .await?
        {
            Ok(())
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        resume_held(self, ticket).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        break_claimed(self, name).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let keys = Keys::new(&self.opts, name);
        dlock_core::backend::revoke_claimed(self, name, |holder| {
            let keys = &keys;
            async move {
                let mark = holder.owner.revoked();
                self.node
                    .revoke(keys, holder.owner.as_str(), mark.as_str())
                    .await
            }
        })
        .await
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        self.node.diagnose().await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let Some(pattern) = crate::keys::scan_pattern(&self.opts, prefix) else {
            return Err(crate::keys::plain_unlisted());
        };
        let mut held = Vec::new();
        for key in self.node.scan(&pattern).await? {
            let Some(name) = crate::keys::name_of(&self.opts, &key) else {
                continue;
            };
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            // waiters listen on a channel; they leave no count behind
            if let Some(holder) = Backend::inspect(self, &name).await? {
                held.push(Held::new(name, holder, None));
            }
        }
        // each holder of a semaphore or a read-write lock (their keys are tagged in
        // every layout)
        for pattern in crate::keys::shared_scan_patterns(&self.opts, prefix).unwrap_or_default() {
            for key in self.node.scan(&pattern).await? {
                let Some((name, access)) = crate::keys::shared_name_of(&self.opts, &key) else {
                    continue;
                };
                let Ok(name) = LockName::new(&name) else {
                    continue;
                };
                let keys = SharedKeys::new(&self.opts.prefix, &name, access);
                for holding in self.node.holders(&keys).await? {
                    held.push(Held::shared(name.clone(), holding));
                }
            }
        }
        held.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        Ok(held)
    }

    fn capabilities(&self) -> Capabilities {
        // FIFO among dlock's clients; in the plain layout other clients take the key
        // without queueing
        CAPABILITIES
            .with_shared(true)
            .with_fair(self.opts.layout == KeyLayout::Tagged)
    }

    fn backend_name(&self) -> &'static str {
        "redis"
    }
}
