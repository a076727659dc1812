//! `RedisLock`: one Redis server.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{Claim, ClaimDriver, Subscription, WaitPolicy, claim};
use dlock_core::{
    Capabilities, DistributedLock, FencingToken, Lease, LockError, LockInfo, LockName, OwnerId,
};
use tokio::time::Instant;

use crate::keys::Keys;
use crate::node::Node;
use crate::options::{Options, Settings, take_url_options};

/// A lock on one Redis server: one Lua script per operation (acquire, renew, release
/// each one round trip), a fencing counter per name that never expires, and waiters
/// woken by a pub/sub message from the release.
///
/// Safety: as safe as the one server. If it fails over to a replica that missed the
/// last writes, or restarts without persistence, a lock can be granted twice; the
/// fencing token — `max(counter + 1, server clock in µs)`, so a counter restored older
/// cannot repeat a token — keeps such a double grant from corrupting a fenced resource.
#[derive(Clone)]
pub struct RedisLock {
    node: Arc<Node>,
    opts: Arc<Options>,
}

impl std::fmt::Debug for RedisLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLock")
            .field("prefix", &self.opts.prefix)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisLock`] with a key prefix and a timeout.
#[derive(Clone, Debug)]
pub struct RedisLockBuilder {
    url: String,
    settings: Settings,
}

impl RedisLockBuilder {
    /// Trusts this CA certificate (PEM) for `rediss://` connections instead of the
    /// system's roots (a private CA). Needs the crate's `tls` feature.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_ca_pem(mut self, pem: &[u8]) -> Self {
        self.settings.opts.tls_ca = Some(pem.to_vec());
        self
    }

    /// Sets the key prefix (default `dlock:`); no braces.
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.settings.prefix(prefix);
        self
    }

    /// How long one command (or connecting) may take before it fails with
    /// `Unavailable` (default 2 s).
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.settings.opts.timeout = d;
        self
    }

    /// Connects.
    ///
    /// # Errors
    /// See [`RedisLock::connect`].
    pub async fn connect(self) -> Result<RedisLock, LockError> {
        let mut opts = self.settings.finish()?;
        let url = take_url_options(&self.url, &mut opts)?;
        let node = Node::connect(&url, opts.timeout, false, opts.tls_ca.as_deref()).await?;
        Ok(RedisLock {
            node: Arc::new(node),
            opts: Arc::new(opts),
        })
    }
}

impl RedisLock {
    /// Connects to `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS, with
    /// the crate's `tls` feature). URL parameters `prefix` and `timeout` are read by
    /// dlock.
    ///
    /// # Errors
    /// [`LockError::Config`] for a malformed URL, [`LockError::Unavailable`] when the
    /// server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::builder(url).connect().await
    }

    /// A builder for prefix and timeout.
    #[must_use]
    pub fn builder(url: &str) -> RedisLockBuilder {
        RedisLockBuilder {
            url: url.to_owned(),
            settings: Settings::new(Duration::from_secs(2)),
        }
    }
}

/// One round trip each way (DESIGN: the uncontended path in the fewest): acquire is
/// one script (`SET NX PX … GET` and the fencing clock), release one script (compare
/// owner, `DEL`, `PUBLISH`), a renewal one script call shared with every renewal due
/// on the same tick.
#[async_trait]
impl ClaimDriver for RedisLock {
    async fn claim(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Claim, LockError> {
        let keys = Keys::new(&self.opts.prefix, name);
        self.node.acquire(&keys, owner.as_str(), ttl, 0).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        DistributedLock::release(self, lease).await
    }

    async fn subscribe(&self, name: &LockName) -> Option<Subscription> {
        let keys = Keys::new(&self.opts.prefix, name);
        self.node
            .subscribe(&keys)
            .await
            .inspect_err(|e| tracing::debug!(error = %e, "subscribe failed; polling instead"))
            .ok()
    }

    fn wait_policy(&self) -> WaitPolicy {
        self.opts.policy
    }
}

#[async_trait]
impl DistributedLock for RedisLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        claim::try_claim(self, name, ttl).await
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        claim::claim(self, name, ttl, wait).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let keys = Keys::new(&self.opts.prefix, lease.name());
        let pending =
            self.node
                .submit_renew(keys.lock.into(), lease.owner().as_str().into(), lease.ttl())?;
        if pending.answer().await? {
            Ok(lease.renewed(lease.ttl(), sent))
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let keys = Keys::new(&self.opts.prefix, lease.name());
        self.node.release(&keys, lease.owner().as_str()).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let keys = Keys::new(&self.opts.prefix, name);
        Ok(self
            .node
            .inspect(&keys)
            .await?
            .map(|(owner, remaining, token)| LockInfo {
                owner: OwnerId::from_stored(&owner),
                token: FencingToken::new(token),
                remaining,
            }))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::per_lease()
            .with_notify(true)
            .with_batched_renewals(true)
    }

    fn backend_name(&self) -> &'static str {
        "redis"
    }
}
