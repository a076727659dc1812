//! Building a [`RedisLock`] or a [`Redlock`]: one builder for both, since they take the
//! same settings (a key prefix, a per-command timeout, a private CA).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;

use crate::node::Node;
use crate::options::{
    KeyLayout, Options, QUEUED_FALLBACK, take_url_options, validate_counter_retention,
    validate_prefix, validate_restart_delay,
};
use crate::{RedisLock, Redlock};

/// Builds a [`RedisLock`] or a [`Redlock`] (`L`) with a key prefix and a timeout; see
/// [`RedisLockBuilder`] and [`RedlockBuilder`].
#[derive(Clone, Debug)]
pub struct Builder<L> {
    urls: Vec<String>,
    opts: Options,
    /// The first invalid value given, reported by `connect`.
    error: Option<String>,
    target: PhantomData<fn() -> L>,
}

/// Builds a [`RedisLock`]: [`RedisLock::builder`].
pub type RedisLockBuilder = Builder<RedisLock>;

/// Builds a [`Redlock`]: [`Redlock::builder`].
pub type RedlockBuilder = Builder<Redlock>;

impl<L> Builder<L> {
    pub(crate) fn new(urls: &[&str], timeout: Duration) -> Self {
        Self {
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            opts: Options::new(timeout),
            error: None,
            target: PhantomData,
        }
    }

    /// Trusts this CA certificate (PEM) for `rediss://` connections instead of the
    /// public web roots rustls carries (a private CA). Needs the crate's `tls` feature.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_ca_pem(mut self, pem: &[u8]) -> Self {
        self.opts.tls_ca = Some(pem.to_vec());
        self
    }

    /// Sets the key prefix (default `dlock:`); no braces.
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> Self {
        match validate_prefix(prefix) {
            Ok(()) => prefix.clone_into(&mut self.opts.prefix),
            Err(e) => self.error = Some(e.to_string()),
        }
        self
    }

    /// How lock keys are named (default [`KeyLayout::Tagged`]; `layout=plain` in the
    /// URL): [`KeyLayout::Plain`] shares locks with the `SET NX` family of clients
    /// (redsync, rslock, redis-py's `Lock`, node-redlock) — with `prefix("")`, their
    /// lock on `orders/42` and dlock's on `orders/42` exclude each other.
    #[must_use]
    pub fn layout(mut self, layout: KeyLayout) -> Self {
        self.opts.layout = layout;
        self
    }

    /// How long one command (or connecting) may take before it fails with
    /// `Unavailable`: default 2 s on one server, 250 ms per node for Redlock — keep it
    /// small next to the TTL there, since the time spent waiting on slow nodes is taken
    /// from the lease.
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.opts.timeout = d;
        self
    }

    /// How long a released lock's fencing counter (one small key per name) is kept
    /// before it expires (default 7 days; `counter-retention=` in the URL; 1 s to 10
    /// years). A name taken again after that gets its token from the server clock, above
    /// its old tokens as long as that clock never steps back by more than this.
    #[must_use]
    pub fn counter_retention(mut self, d: Duration) -> Self {
        match validate_counter_retention(d) {
            Ok(()) => self.opts.counter_retention = d,
            Err(e) => self.error = Some(e),
        }
        self
    }

    /// The settings and one connected node per URL (dlock's URL parameters applied).
    /// Nodes that are down are retried on use.
    async fn nodes(self, redlock: bool) -> Result<(Vec<Arc<Node>>, Options), LockError> {
        if let Some(e) = self.error {
            return Err(LockError::Config(e));
        }
        let mut opts = self.opts;
        let mut plain = Vec::new();
        for u in &self.urls {
            plain.push(take_url_options(u, &mut opts, redlock)?);
        }
        if opts.layout == KeyLayout::Plain {
            // the SET NX family releases without a message: look again every 100 ms
            opts.policy.notify_fallback = opts.policy.notify_fallback.min(opts.policy.poll_max);
        } else if !redlock {
            opts.policy.notify_fallback = QUEUED_FALLBACK;
        }
        let mut nodes = Vec::new();
        for u in &plain {
            // a Redlock starts while a minority of its nodes is down
            let node = Node::connect(u, &opts, redlock);
            nodes.push(Arc::new(node.await?));
        }
        Ok((nodes, opts))
    }
}

impl Builder<RedisLock> {
    /// Connects.
    ///
    /// # Errors
    /// See [`RedisLock::connect`].
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(self) -> Result<RedisLock, LockError> {
        let (mut nodes, opts) = self.nodes(false).await?;
        let node = nodes
            .pop()
            .ok_or_else(|| LockError::Config("no Redis URL given".into()))?;
        Ok(RedisLock::new(node, Arc::new(opts)))
    }
}

impl Builder<Redlock> {
    /// How long a node grants nothing after it starts (default
    /// [`crate::DEFAULT_RESTART_DELAY`], 60 s; `restart-delay=` in the URL; 0 for off, or
    /// 3 s — past the 2 s a grant may run ahead of the clocks — to a day):
    /// Redlock's delayed restart, which keeps a node that lost its data from granting a
    /// name it granted before — or a token below one it granted — through a quorum with
    /// nodes that missed that grant. An acquisition with a longer TTL is refused with
    /// [`LockError::InvalidArgument`]; 0 turns the delay off, safe only when every node
    /// keeps its data across restarts (`appendfsync always`). The node reads its
    /// uptime with `INFO`: a user whose ACL denies it gets [`LockError::Config`] until
    /// it is allowed (`+info`).
    #[must_use]
    pub fn restart_delay(mut self, d: Duration) -> Self {
        match validate_restart_delay(d) {
            Ok(()) => self.opts.restart_delay = d,
            Err(e) => self.error = Some(e),
        }
        self
    }

    /// Prepares connections to every node. Nodes that are down are retried on use, so
    /// a Redlock can start while a minority of its nodes is unreachable.
    ///
    /// # Errors
    /// [`LockError::Config`] for no URLs or a malformed one.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(self) -> Result<Redlock, LockError> {
        if self.urls.is_empty() {
            return Err(LockError::Config(
                "Redlock needs at least one Redis URL".into(),
            ));
        }
        let (nodes, opts) = self.nodes(true).await?;
        Ok(Redlock {
            nodes: Arc::new(nodes),
            opts: Arc::new(opts),
        })
    }
}
