//! One acquisition, described whole: the only way a lock is taken
//! ([`crate::DistributedLock::acquire_with`]); every familiar call builds one.

use std::time::Duration;

use crate::{Access, HolderValue, LockName};

/// What to take, for how long, and how long to wait for it **(contract)**.
///
/// Built from a name and a TTL (the mutex, a single attempt), then narrowed:
///
/// ```
/// use std::time::Duration;
/// use dlock_core::{Access, Acquisition, HolderValue, LockName};
///
/// let name = LockName::new("exports/daily")?;
/// let value = HolderValue::new("worker-7")?;
/// let request = Acquisition::new(&name, Duration::from_secs(30))
///     .with_access(Access::Permit(4))
///     .waiting(Duration::from_secs(5))
///     .with_value(&value);
/// assert_eq!(request.access(), Access::Permit(4));
/// assert_eq!(request.wait(), Some(Duration::from_secs(5)));
/// # Ok::<(), dlock_core::LockError>(())
/// ```
///
/// A single attempt ([`Acquisition::wait`] is `None`) answers `Ok(None)` when the
/// lock is busy; a wait answers a lease or an error ([`crate::LockError::Timeout`] when
/// the wait runs out on a busy lock), never `Ok(None)`.
#[derive(Clone, Copy, Debug)]
pub struct Acquisition<'a> {
    name: &'a LockName,
    access: Access,
    ttl: Duration,
    wait: Option<Duration>,
    value: Option<&'a HolderValue>,
}

impl<'a> Acquisition<'a> {
    /// A single attempt at `name`'s mutex with a lease of `ttl`.
    #[must_use]
    pub fn new(name: &'a LockName, ttl: Duration) -> Self {
        Self {
            name,
            access: Access::Exclusive,
            ttl,
            wait: None,
            value: None,
        }
    }

    /// How the lease shares its name: a semaphore's permit, a reader, a writer.
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Waits up to `wait` for the lock (`Duration::ZERO`: one attempt, and
    /// [`crate::LockError::Timeout`] if it is busy).
    #[must_use]
    pub fn waiting(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Stores `value` with the lease (see [`crate::LockInfo::value`]), if there is one.
    #[must_use]
    pub fn with_value(mut self, value: impl Into<Option<&'a HolderValue>>) -> Self {
        self.value = value.into();
        self
    }

    /// The name.
    #[must_use]
    pub fn name(&self) -> &'a LockName {
        self.name
    }

    /// The access asked for.
    #[must_use]
    pub fn access(&self) -> Access {
        self.access
    }

    /// The lease's TTL.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How long to wait; `None` for a single attempt that may find the lock busy.
    #[must_use]
    pub fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// The holder value, if any.
    #[must_use]
    pub fn value(&self) -> Option<&'a HolderValue> {
        self.value
    }
}
