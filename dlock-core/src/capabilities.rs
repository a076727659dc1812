//! Facts an adapter declares about itself.

/// How long a lease lives without renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseScope {
    /// An unrenewed lease expires after its TTL even while the client lives
    /// (Redis, etcd, SQL, memory).
    PerLease,
    /// Leases live as long as the client's session (ZooKeeper ephemeral nodes); the
    /// TTL is the session timeout and renewal confirms the session.
    PerSession,
}

/// What an adapter guarantees beyond the trait's rules. The conformance suite checks
/// each declared capability, so declaring one is a promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Waiters get the lock in the order they started waiting.
    pub fair: bool,
    /// How leases expire.
    pub lease_scope: LeaseScope,
    /// Waiters are woken by the server rather than by polling.
    pub notify: bool,
    /// Renewals that arrive together are sent together (one script call, one
    /// keep-alive, one multi-read): [`crate::LockGuard`]s then renew on a shared grid so
    /// that they do arrive together. Backends without batching get their guards'
    /// renewals spread over time instead.
    pub batched_renewals: bool,
    /// Semaphores and read-write locks are offered
    /// ([`crate::DistributedSemaphore`], [`crate::DistributedRwLock`]) with the mutex's
    /// guarantees; without it their methods fail with [`crate::LockError::Unsupported`].
    pub shared: bool,
    /// The longest TTL the backend takes, where it bounds one (Redlock: its restart
    /// delay); a longer one is refused with [`crate::LockError::InvalidArgument`].
    /// Callers with a default of their own (`dlock acquire`'s five minutes) use it to
    /// pick one the backend takes.
    pub max_ttl: Option<std::time::Duration>,
}

impl Capabilities {
    /// Leases that expire on their own ([`LeaseScope::PerLease`]); not fair, no push
    /// wake-ups, no batched renewals until declared with the `with_` methods.
    ///
    /// ```
    /// use dlock_core::{Capabilities, LeaseScope};
    /// let caps = Capabilities::per_lease().with_notify(true).with_batched_renewals(true);
    /// assert!(caps.notify && caps.batched_renewals && !caps.fair);
    /// assert_eq!(caps.lease_scope, LeaseScope::PerLease);
    /// ```
    #[must_use]
    pub const fn per_lease() -> Self {
        Self::new(false, LeaseScope::PerLease, false)
    }

    /// Leases that live with the client's session ([`LeaseScope::PerSession`]); the
    /// rest as [`Capabilities::per_lease`].
    #[must_use]
    pub const fn per_session() -> Self {
        Self::new(false, LeaseScope::PerSession, false)
    }

    /// Declares that waiters get the lock in the order they started waiting.
    #[must_use]
    pub const fn with_fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    /// Declares that waiters are woken by the server rather than by polling.
    #[must_use]
    pub const fn with_notify(mut self, on: bool) -> Self {
        self.notify = on;
        self
    }

    /// Declares the three facts by position (and no batched renewals); the named
    /// [`Capabilities::per_lease`] / [`Capabilities::per_session`] with the `with_`
    /// methods read better.
    #[must_use]
    pub const fn new(fair: bool, lease_scope: LeaseScope, notify: bool) -> Self {
        Self {
            fair,
            lease_scope,
            notify,
            batched_renewals: false,
            shared: false,
            max_ttl: None,
        }
    }

    /// Declares that semaphores and read-write locks are offered.
    #[must_use]
    pub const fn with_shared(mut self, on: bool) -> Self {
        self.shared = on;
        self
    }

    /// Declares the longest TTL the backend takes.
    #[must_use]
    pub const fn with_max_ttl(mut self, max: Option<std::time::Duration>) -> Self {
        self.max_ttl = max;
        self
    }

    /// Declares that renewals arriving together are sent together.
    #[must_use]
    pub const fn with_batched_renewals(mut self, on: bool) -> Self {
        self.batched_renewals = on;
        self
    }
}
