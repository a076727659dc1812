//! What a family driver is asked for in one attempt: built once by core from the
//! trait's [`crate::Acquisition`], read by the driver.

use std::time::Duration;

use crate::{Access, LockName, OwnerId};

/// One attempt's request, as a family driver gets it: [`super::ClaimDriver::claim`],
/// [`super::QueueDriver::try_take`] (which never waits) and
/// [`super::QueueDriver::enqueue`] (which always does).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AttemptRequest<'a> {
    /// The lock's name.
    pub name: &'a LockName,
    /// What is asked for: the lock, N permits, a read or the write lease (validated).
    pub access: Access,
    /// The acquisition's owner id, the same for each of its attempts.
    pub owner: &'a OwnerId,
    /// The lease's TTL (validated; zero in the placeholder request an observer's
    /// [`super::ClaimDriver::watch`] passes to `subscribe`).
    pub ttl: Duration,
    /// The caller will wait and try again if this attempt fails.
    pub waits: bool,
}

impl<'a> AttemptRequest<'a> {
    /// A request for `access` to `name` by `owner` for `ttl`, that does not wait
    /// (see [`AttemptRequest::waiting`]).
    #[must_use]
    pub fn new(name: &'a LockName, access: Access, owner: &'a OwnerId, ttl: Duration) -> Self {
        Self {
            name,
            access,
            owner,
            ttl,
            waits: false,
        }
    }

    /// The same request, from a caller that will (or will not) wait and try again.
    #[must_use]
    pub fn waiting(self, waits: bool) -> Self {
        Self { waits, ..self }
    }
}
