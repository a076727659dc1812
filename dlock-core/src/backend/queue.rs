//! The queue family's algorithm (etcd, ZooKeeper, memory): a lock is a queue of
//! entries in the order they joined; the first entry holds it, and each waiter waits
//! for the entry right before its own (no herd, FIFO).
//!
//! A [`QueueDriver`] is the backend's protocol — join, wait for the predecessor, turn
//! the head entry into a lease — and [`queue`] is everything around it, written once:
//! TTL validation, the owner id, the deadline, the retry rule for transient errors, and
//! the "am I still queued" re-check after a wait (the driver's `grant` is told that it
//! waited). Leaving the queue is the entry's own `Drop`, so a dropped, failed or
//! timed-out acquisition leaves nothing behind whichever await it stopped at.
//!
//! The same driver carries the other primitives: an entry names its [`Access`](crate::Access), and the
//! driver decides its turn with [`super::standing`] (a permit when fewer than N entries
//! precede it, a reader when no writer does, a writer when it is first) and watches the
//! entries that rule names — the waiting loop stays this one.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{AttemptRequest, retry_transient};
use crate::backoff::Deadline;
use crate::{Acquisition, Lease, LockError, LockName};

/// Where an entry stands in its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The entry may hold its name now (first, for the mutex).
    Head,
    /// Someone is ahead.
    Behind,
}

/// A queue backend's protocol (see the [module](self)).
#[async_trait]
pub trait QueueDriver: Send + Sync {
    /// One acquisition's place in a queue. Dropping it before [`QueueDriver::grant`]
    /// handed out its lease must leave the queue (delete the key or node, wake the
    /// next): that is what makes every acquisition cancel safe.
    type Entry: Send;

    /// `try_acquire`'s one attempt for the request's owner (a fresh acquisition, TTL
    /// and access checked): takes its name with its access only if the queue lets it
    /// hold at once, and
    /// leaves nothing queued when it does not. A backend without
    /// [`crate::Capabilities::shared`] answers [`LockError::Unsupported`] for anything but
    /// [`Access::Exclusive`](crate::Access::Exclusive).
    ///
    /// # Cancel safety
    /// As the trait method of the same name. A queue entry created for a dropped call
    /// must not outlive its TTL (rule 6).
    async fn try_take(&self, request: &AttemptRequest<'_>) -> Result<Option<Lease>, LockError>;

    /// Joins the request's name's queue (of its access's primitive) for its owner, with
    /// its TTL; where the new entry stands.
    ///
    /// # Cancel safety
    /// An entry created for a dropped call must be removed or expire within its TTL
    /// (rule 6).
    async fn enqueue(&self, request: &AttemptRequest<'_>)
    -> Result<(Self::Entry, Turn), LockError>;

    /// Waits until the entry right before ours is gone (or `until`, then answers
    /// [`Turn::Behind`]) and says where ours stands now. An entry that vanished meanwhile
    /// (session expired, key swept) is a transient error: the acquisition queues again.
    ///
    /// # Cancel safety
    /// Dropping it changes nothing: the entry keeps its place.
    async fn next_turn(&self, entry: &mut Self::Entry, until: Instant) -> Result<Turn, LockError>;

    /// The lease of an entry at the head, which from then on is no longer left on drop;
    /// `None` when the grant cannot be trusted yet (the answer came too late: look
    /// again). After a wait (`waited`), the driver makes sure the entry still exists.
    ///
    /// # Cancel safety
    /// As [`crate::DistributedLock::acquire`].
    async fn grant(
        &self,
        entry: &mut Self::Entry,
        waited: bool,
    ) -> Result<Option<Lease>, LockError>;

    /// Waits until `holder`'s entry in `name`'s mutex queue is gone, or `until`
    /// (see [`crate::DistributedLock::holder_changed`]). The provided implementation
    /// polls; backends with watches wait on the entry itself.
    ///
    /// # Cancel safety
    /// A wait: dropping it changes nothing.
    async fn holder_gone(
        &self,
        name: &LockName,
        holder: &crate::LockInfo,
        until: Instant,
    ) -> Result<(), LockError> {
        let _ = name;
        tokio::time::sleep_until(crate::poll_until(Some(holder), until)).await;
        Ok(())
    }
}

/// `acquire` for a queue backend: joins the queue and waits for its turn; a transient
/// error ends that acquisition (its entry left) and a new one queues again, until
/// `wait` runs out.
///
/// # Errors
/// `InvalidArgument` for a TTL out of range; `Timeout`; the last transient error when
/// the wait ended on one; any permanent error at once.
///
/// # Cancel safety
/// Dropping it at any point leaves the queue (the entry's `Drop`).
pub async fn queue<D: QueueDriver + ?Sized>(
    driver: &D,
    acquisition: &Acquisition<'_>,
    wait: Duration,
) -> Result<Lease, LockError> {
    // the TTL is checked once, by each attempt's `new_acquisition` (a permanent error:
    // the first attempt ends the loop)
    let access = acquisition.access().validate()?;
    let acquisition = acquisition.with_access(access);
    retry_transient(acquisition.name(), wait, |left| {
        wait_in_line(driver, &acquisition, left)
    })
    .await
}

/// One acquisition (its access validated): join, then wait for the entries ahead
/// until it may hold.
async fn wait_in_line<D: QueueDriver + ?Sized>(
    driver: &D,
    acquisition: &Acquisition<'_>,
    wait: Duration,
) -> Result<Lease, LockError> {
    let deadline = Deadline::after(wait);
    let (name, access, ttl) = (acquisition.name(), acquisition.access(), acquisition.ttl());
    let owner = super::new_acquisition(ttl, acquisition.value())?;
    let request = AttemptRequest::new(name, access, &owner, ttl).waiting(true);
    let (mut entry, mut turn) = driver.enqueue(&request).await?;
    let mut waited = false;
    loop {
        if turn == Turn::Head
            && let Some(lease) = driver.grant(&mut entry, waited).await?
        {
            return Ok(lease);
        }
        if deadline.passed() {
            return Err(LockError::Timeout {
                name: name.to_string(),
                waited: deadline.waited(),
            });
        }
        turn = driver.next_turn(&mut entry, deadline.end()).await?;
        waited = true;
    }
}
