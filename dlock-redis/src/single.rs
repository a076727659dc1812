//! `RedisLock`: one Redis server.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Attempt, Capabilities, DistributedLock, FencingToken, Lease, LeaseScope, LockError, LockInfo,
    LockName, OwnerId, Subscription,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::acquire::{self, Attempts};
use crate::keys::Keys;
use crate::node::{Node, NodeTaken};
use crate::options::{Options, Settings, take_url_options};
use crate::renewals;

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

#[async_trait]
impl Attempts for RedisLock {
    fn opts(&self) -> &Options {
        &self.opts
    }

    async fn attempt(
        &self,
        name: &LockName,
        keys: &Keys,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let sent = Instant::now();
        match self.node.acquire(keys, owner.as_str(), ttl).await? {
            NodeTaken::Yes(token) => {
                let lease = Lease::new(
                    name.clone(),
                    owner.clone(),
                    FencingToken::new(token),
                    ttl,
                    sent,
                );
                if lease.is_valid() {
                    Ok(Attempt::Acquired(lease))
                } else {
                    let _ = self.release(&lease).await;
                    Ok(Attempt::Held {
                        remaining: Some(Duration::ZERO),
                    })
                }
            }
            NodeTaken::No { pttl } => Ok(Attempt::Held { remaining: pttl }),
        }
    }

    async fn subscribe(&self, keys: &Keys) -> Option<Subscription> {
        let notify = Arc::new(Notify::new());
        match self.node.subscribe(keys, &notify).await {
            Ok(guard) => Some(Subscription::new(notify, Some(Box::new(guard)))),
            Err(e) => {
                tracing::debug!(error = %e, "subscribe failed; polling instead");
                None
            }
        }
    }
}

#[async_trait]
impl DistributedLock for RedisLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        acquire::try_acquire(self, name, ttl).await
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        acquire::acquire(self, name, ttl, wait).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let keys = Keys::new(&self.opts.prefix, lease.name());
        let pending =
            self.node
                .submit_renew(keys.lock.into(), lease.owner().as_str().into(), lease.ttl())?;
        if renewals::answer(pending).await? {
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
        Capabilities::new(false, LeaseScope::PerLease, true).with_batched_renewals(true)
    }

    fn backend_name(&self) -> &'static str {
        "redis"
    }
}
