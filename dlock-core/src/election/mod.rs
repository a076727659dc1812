//! Leader election on any [`DistributedLock`]: the leader is the holder of one lock,
//! its epoch is that lease's fencing token, and its value (an address, say) is stored
//! with the lease ([`DistributedLock::acquire_with_value`]), so every reader sees the
//! value of the holder it sees — never one left behind by an earlier leader.
//!
//! Guarantees, each kept by the lock underneath:
//! - at most one leader at a time, counting each leadership until its `valid_until`;
//! - epochs strictly increase from one leadership to the next (fencing tokens);
//! - a leader whose lease is lost learns it ([`Leadership::lost`]) before the server
//!   can let anyone else lead (the guard's `valid_until` rule);
//! - an [`Observer`] never reports an epoch older than one it already reported (a
//!   read served by a lagging member is skipped, not reported as a change back);
//! - a value the leader proclaims ([`Leadership::proclaim`]) is its own: written only
//!   while its lease holds, never reported for another leader.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use dlock_core::{Election, MemoryLock};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let backend = Arc::new(MemoryLock::new());
//! let election = Election::new(backend, "controller")?.with_ttl(Duration::from_secs(10));
//! let mut changes = election.observe();
//! assert!(changes.next().await?.is_none()); // nobody leads yet
//!
//! let leadership = election.campaign("10.0.0.7:9092").await?;
//! let seen = changes.next().await?.expect("a leader");
//! assert_eq!(seen.value.as_deref(), Some("10.0.0.7:9092"));
//! assert_eq!(seen.epoch, leadership.epoch());
//! leadership.resign().await?;
//! # Ok(()) }
//! ```

mod leadership;
mod observer;
mod requeue;

use std::sync::Arc;
use std::time::Duration;

use crate::{
    DEFAULT_TTL, DistributedLock, FencingToken, HolderValue, LockError, LockInfo, LockName, Locker,
    ToLockName,
};

pub use leadership::Leadership;
pub use observer::Observer;

/// A leader as readers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The value the leader campaigned with (`None` for a holder that took the lock
    /// without one).
    pub value: Option<String>,
    /// The leadership's epoch: its fencing token.
    pub epoch: FencingToken,
}

impl Leader {
    fn from_info(info: &LockInfo) -> Self {
        Self {
            value: info.value().map(|v| v.as_str().to_owned()),
            epoch: info.token,
        }
    }
}

/// One election: candidates [`Election::campaign`], anyone reads
/// [`Election::leader`] or follows changes with [`Election::observe`].
#[derive(Clone)]
pub struct Election {
    lock: Arc<dyn DistributedLock>,
    name: LockName,
    ttl: Duration,
    requeue_pause: Duration,
}

impl Election {
    /// The election named `name` on `lock` (the lock of that name is its leadership),
    /// with leaderships of [`DEFAULT_TTL`].
    ///
    /// # Errors
    /// [`LockError::InvalidName`].
    pub fn new(lock: Arc<dyn DistributedLock>, name: impl ToLockName) -> Result<Self, LockError> {
        Ok(Self {
            lock,
            name: name.to_lock_name()?,
            ttl: DEFAULT_TTL,
            requeue_pause: requeue::REQUEUE_PAUSE,
        })
    }

    /// Sets the leadership's lease TTL: how long the leadership outlives a crashed
    /// leader, at most.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The election's name.
    #[must_use]
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// Waits until this candidate leads, however long that takes; an outage is waited
    /// out (with a warning). Cancel it by dropping the future.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for a bad value or TTL; never a lease from a
    /// [`crate::FallbackLock`] (an outage is waited out: a fallback cannot choose one
    /// leader among hosts);
    /// [`LockError::Unsupported`] where the backend cannot store a value; any error
    /// that retrying cannot cure.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`]: dropping it leaves no candidacy behind.
    pub async fn campaign(&self, value: &str) -> Result<Leadership, LockError> {
        loop {
            match self.campaign_for(value, CAMPAIGN_ROUND).await {
                Err(LockError::Timeout { .. }) => {}
                Err(e @ LockError::Unavailable { .. }) => {
                    tracing::warn!(election = %self.name, error = %e, "backend unavailable; campaigning on");
                    tokio::time::sleep(OUTAGE_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// As [`Election::campaign`], giving up after `wait`.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when someone else led all along, and those of
    /// [`Election::campaign`].
    ///
    /// # Cancel safety
    /// As [`Election::campaign`].
    pub async fn campaign_for(&self, value: &str, wait: Duration) -> Result<Leadership, LockError> {
        let value = HolderValue::new(value)?;
        let lease = self
            .lock
            .acquire_with_value(&self.name, self.ttl, wait, &value)
            .await?;
        if lease.fallback().is_some() {
            // a fallback excludes this process's callers at most: every host would lead
            let _ = self.lock.release(&lease).await;
            return Err(LockError::transient(format!(
                "no leader of {} can be chosen while the lock service is unreachable",
                self.name
            )));
        }
        let locker = Locker::new(Arc::clone(&self.lock)).with_ttl(self.ttl);
        Ok(Leadership::new(locker.guard(lease).await?, value))
    }

    /// The current leader, if any.
    ///
    /// # Errors
    /// A backend error.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    pub async fn leader(&self) -> Result<Option<Leader>, LockError> {
        Ok(self
            .lock
            .inspect(&self.name)
            .await?
            .as_ref()
            .map(Leader::from_info))
    }

    /// Follows the leadership: the first [`Observer::next`] reports the current state,
    /// each later one the next change.
    #[must_use]
    pub fn observe(&self) -> Observer {
        Observer::new(Arc::clone(&self.lock), self.name.clone())
    }
}

/// How long one acquisition of a campaign waits before it is renewed (a fresh
/// acquisition, so its lease's validity counts from then).
const CAMPAIGN_ROUND: Duration = Duration::from_secs(60);
/// The pause between campaign rounds during an outage.
const OUTAGE_PAUSE: Duration = Duration::from_millis(500);
