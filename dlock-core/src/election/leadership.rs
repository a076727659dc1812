//! A won election: the guard of the leadership's lease.

use std::future::Future;

use crate::{FencingToken, HolderValue, LockError, LockGuard};

/// This process leads: renewed in the background like any [`LockGuard`]. Stop acting
/// as leader when [`Leadership::lost`] fires; pass [`Leadership::epoch`] with every
/// write a leader makes, so a store can refuse a deposed leader's late writes.
#[derive(Debug)]
pub struct Leadership {
    guard: LockGuard,
    value: HolderValue,
}

impl Leadership {
    pub(crate) fn new(guard: LockGuard, value: HolderValue) -> Self {
        Self { guard, value }
    }

    /// The epoch: this leadership's fencing token, above every earlier leadership's.
    #[must_use]
    pub fn epoch(&self) -> FencingToken {
        self.guard.token()
    }

    /// The value this leader campaigned with, or proclaimed last.
    #[must_use]
    pub fn value(&self) -> &str {
        self.value.as_str()
    }

    /// Changes the value readers see for this leader — a new address, say — without
    /// a new epoch (etcd's `Proclaim`): [`super::Election::leader`] and every
    /// [`super::Observer`] report it next.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for a bad value; [`LockError::LeaseLost`] when
    /// the leadership is lost; those of [`crate::DistributedLock::proclaim`].
    ///
    /// # Cancel safety
    /// Dropped once sent, readers see the old value or the new one (and
    /// [`Leadership::value`] stays the old one).
    pub async fn proclaim(&mut self, value: &str) -> Result<(), LockError> {
        let value = HolderValue::new(value)?;
        self.guard.proclaim(&value).await?;
        self.value = value;
        Ok(())
    }

    /// `true` while the leadership is certainly held.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// Completes when the leadership is lost: a renewal refused, or the lease's
    /// `valid_until` passed without a renewal — the latter before anyone else can be
    /// granted it by the server's expiry. A leadership taken away on the server (an
    /// operator's `break_holder`, `dlock release --force`) is seen at the next renewal,
    /// by which time the next candidate may lead: fence the leader's writes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// The guard underneath.
    #[must_use]
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Steps down, waking the next candidate. `Ok(false)` if it was already lost.
    ///
    /// # Errors
    /// A backend error; the leadership then ends by its TTL.
    ///
    /// # Cancel safety
    /// As [`crate::LockGuard::release`]: dropped before the release was answered, the
    /// leadership ends by its TTL at the latest.
    pub async fn resign(self) -> Result<bool, LockError> {
        self.guard.release().await
    }
}
