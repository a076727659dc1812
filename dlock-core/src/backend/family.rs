//! How an adapter becomes a [`DistributedLock`] without writing `acquire` itself.
//!
//! An adapter implements [`Backend`] — renewal, release, inspection, what it
//! guarantees — and names its [`Family`]: [`Claims`] when it is a [`ClaimDriver`],
//! [`Queues`] when it is a [`QueueDriver`]. Core's one blanket implementation turns
//! that into the trait, taking the lock through the family's algorithm, so every
//! backend of a family acquires, waits and retries through the same code.
//!
//! ```
//! use dlock_core::backend::{Backend, Queues};
//! use dlock_core::{DistributedLock, MemoryLock};
//!
//! fn is_a_lock<L: DistributedLock>() {}
//! fn queues<B: Backend<Family = Queues>>() {}
//! is_a_lock::<MemoryLock>();
//! queues::<MemoryLock>(); // the in-memory lock is a queue backend
//! ```

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{AttemptRequest, ClaimDriver, QueueDriver, claim, queue};
use crate::{
    Access, Acquisition, Capabilities, DistributedLock, Held, HolderWatch, Holding, Lease,
    LockError, LockInfo, LockName, Ticket,
};

/// What an adapter writes besides its family's driver: the parts of
/// [`DistributedLock`] that are not taking the lock. Each method is the trait method of
/// the same name and keeps its rules.
#[async_trait]
pub trait Backend: Send + Sync {
    /// How this backend takes a lock: [`Claims`] or [`Queues`].
    type Family: Family<Self>;

    /// As [`DistributedLock::renew`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError>;

    /// As [`DistributedLock::release`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError>;

    /// As [`DistributedLock::inspect`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError>;

    /// As [`DistributedLock::release_after`]: by default a renewal with a TTL of
    /// `linger`, for backends whose renewal sets the lease's TTL.
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        if linger.is_zero() {
            return self.release(lease).await;
        }
        // a lease is never shorter than MIN_TTL: holding a few ms longer is safe
        let ttl = linger.max(crate::MIN_TTL);
        match self.renew(&lease.renewed(ttl, Instant::now())).await {
            Ok(_) => Ok(true),
            Err(LockError::LeaseLost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// As [`DistributedLock::capabilities`].
    fn capabilities(&self) -> Capabilities;

    /// As [`DistributedLock::backend_name`].
    fn backend_name(&self) -> &'static str;

    /// The current holders of the semaphore (`of` is a [`Access::Permit`]) or the
    /// read-write lock (`of` is [`Access::Read`] or [`Access::Write`]) named `name`,
    /// oldest grant first. Unsupported unless the backend declares
    /// [`Capabilities::shared`].
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        let _ = name;
        Err(LockError::unsupported(self.backend_name(), of))
    }

    /// As [`DistributedLock::hand_over`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        Ticket::of(self.backend_name(), lease)
    }

    /// As [`DistributedLock::resume`]; a backend whose lease is its stored row or key
    /// answers with [`super::resume_held`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        let _ = ticket;
        Err(crate::ticket::unsupported(self.backend_name()))
    }

    /// As [`DistributedLock::proclaim`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn proclaim(&self, lease: &Lease, value: &crate::HolderValue) -> Result<(), LockError> {
        let _ = (lease, value);
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "proclaiming a holder value",
        ))
    }

    /// As [`DistributedLock::diagnose`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn diagnose(&self) -> Result<Vec<crate::Finding>, LockError> {
        Ok(Vec::new())
    }

    /// As [`DistributedLock::list`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        let _ = prefix;
        Err(LockError::Unsupported {
            backend: self.backend_name(),
            what: "listing its locks".into(),
        })
    }

    /// As [`DistributedLock::break_holder`]; a backend whose release goes by name,
    /// owner id and token answers with [`super::break_claimed`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let _ = name;
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "breaking a holder",
        ))
    }

    /// As [`DistributedLock::revoke_holder`].
    ///
    /// # Cancel safety
    /// As the trait method of the same name.
    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let _ = name;
        Err(LockError::unsupported_feature(
            self.backend_name(),
            "revoking a holder",
        ))
    }
}

/// A way of taking a lock, written once for every backend `B` of the family, for every
/// [`Access`]: the mutex, a semaphore's permit, a reader or a writer.
#[async_trait]
pub trait Family<B: ?Sized + Sync>: Send + Sync {
    /// [`DistributedLock::acquire_with`] on `backend`: one attempt, or a wait.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire_with`].
    async fn acquire_with(
        backend: &B,
        request: &Acquisition<'_>,
    ) -> Result<Option<Lease>, LockError>;

    /// [`DistributedLock::holder_changed`] on `backend`.
    ///
    /// # Cancel safety
    /// A wait: dropping it changes nothing.
    async fn holder_changed(backend: &B, watch: &HolderWatch<'_>) -> Result<(), LockError>;
}

/// The claim family (Redis, Redlock, SQL): [`claim::try_claim`] and [`claim::claim`].
#[derive(Debug)]
pub enum Claims {}

/// The queue family (etcd, ZooKeeper, memory): [`QueueDriver::try_take`] and
/// [`queue::queue`].
#[derive(Debug)]
pub enum Queues {}

#[async_trait]
impl<B: ClaimDriver + ?Sized> Family<B> for Claims {
    async fn acquire_with(
        backend: &B,
        request: &Acquisition<'_>,
    ) -> Result<Option<Lease>, LockError> {
        match request.wait() {
            None => claim::try_claim(backend, request).await,
            Some(wait) => claim::claim(backend, request, wait).await.map(Some),
        }
    }

    /// Woken by the release notification; an expiry is not announced, so the wait ends
    /// at the holder's expiry too (and at the policy's fallback, in case a
    /// notification was lost). Subscribed first, then looked at again, so a release
    /// between the caller's look and the subscription is not missed.
    async fn holder_changed(backend: &B, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        let HolderWatch {
            name, seen, until, ..
        } = *watch;
        let subscription = match seen {
            Some(_) => backend.watch(name).await,
            None => None,
        };
        let Some(subscription) = subscription else {
            tokio::time::sleep_until(crate::poll_until(seen, until)).await;
            return Ok(());
        };
        // another holder, or a value proclaimed since: the caller looks again (a
        // proclaim is announced on Redis only: elsewhere seen at the fallback's pace)
        let now = Backend::inspect(backend, name).await?;
        let Some(now) = now
            .filter(|h| seen.is_some_and(|s| s.owner == h.owner && s.proclaimed == h.proclaimed))
        else {
            return Ok(());
        };
        let fallback = backend.wait_policy().notify_fallback;
        let wake = (Instant::now() + now.remaining.min(fallback)).min(until);
        tokio::select! {
            () = subscription.notified() => {}
            () = tokio::time::sleep_until(wake) => {}
        }
        Ok(())
    }
}

#[async_trait]
impl<B: QueueDriver + ?Sized> Family<B> for Queues {
    async fn acquire_with(
        backend: &B,
        request: &Acquisition<'_>,
    ) -> Result<Option<Lease>, LockError> {
        match request.wait() {
            None => {
                let access = request.access().validate()?;
                let owner = super::new_acquisition(request.ttl(), request.value())?;
                let attempt = AttemptRequest::new(request.name(), access, &owner, request.ttl());
                backend.try_take(&attempt).await
            }
            Some(wait) => queue::queue(backend, request, wait).await.map(Some),
        }
    }

    async fn holder_changed(backend: &B, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        match watch.seen {
            Some(holder) => backend.holder_gone(watch.name, holder, watch.until).await,
            None => {
                tokio::time::sleep_until(crate::poll_until(None, watch.until)).await;
                Ok(())
            }
        }
    }
}

#[async_trait]
impl<B: Backend> DistributedLock for B {
    async fn acquire_with(&self, request: &Acquisition<'_>) -> Result<Option<Lease>, LockError> {
        B::Family::acquire_with(self, request).await
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        Backend::holders(self, name, of).await
    }

    // A lease handed over for a ticket is the ticket taker's: here it is neither
    // renewed nor released (see `Lease::is_handed_over`).
    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        if lease.is_handed_over() {
            return Err(LockError::lease_lost(lease.name()));
        }
        Backend::renew(self, lease).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        if lease.is_handed_over() {
            return Ok(false);
        }
        Backend::release(self, lease).await
    }

    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        if lease.is_handed_over() {
            return Ok(false);
        }
        Backend::release_after(self, lease, linger).await
    }

    async fn holder_changed(&self, watch: &HolderWatch<'_>) -> Result<(), LockError> {
        B::Family::holder_changed(self, watch).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Backend::inspect(self, name).await
    }

    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        if lease.is_handed_over() {
            return Err(LockError::lease_lost(lease.name()));
        }
        let ticket = Backend::hand_over(self, lease).await?;
        lease.mark_handed_over();
        Ok(ticket)
    }

    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        Backend::resume(self, ticket).await
    }

    async fn proclaim(&self, lease: &Lease, value: &crate::HolderValue) -> Result<(), LockError> {
        Backend::proclaim(self, lease, value).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Held>, LockError> {
        Backend::list(self, prefix).await
    }

    async fn diagnose(&self) -> Result<Vec<crate::Finding>, LockError> {
        Backend::diagnose(self).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Backend::break_holder(self, name).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Backend::revoke_holder(self, name).await
    }

    fn capabilities(&self) -> Capabilities {
        Backend::capabilities(self)
    }

    fn backend_name(&self) -> &'static str {
        Backend::backend_name(self)
    }
}
