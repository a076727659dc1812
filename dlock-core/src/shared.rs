//! Semaphores and read-write locks: the primitives beside the mutex, with its
//! guarantees.
//!
//! Both hand out [`Lease`]s marked with their [`Access`], which renew and release
//! through [`DistributedLock::renew`] / [`DistributedLock::release`] like a mutex lease,
//! and carry a fencing token from the name's own counter: tokens strictly increase per
//! name in grant order, so a writer's token is above every token granted before it.
//!
//! What a store should check: a resource written only under the write side keeps the
//! highest writer token it has seen and refuses a lower one (readers do not write). A
//! semaphore's holders overlap by design, so their tokens order grants rather than
//! exclude each other: use one to fence what a single permit holder owns alone (a work
//! item claimed under the permit), and [`crate::LockGuard::lost`] to stop when a permit
//! is gone.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use dlock_core::{DistributedRwLock, DistributedSemaphore, LockName, MemoryLock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = Arc::new(MemoryLock::new());
//! let (name, ttl) = (LockName::new("db/connections")?, Duration::from_secs(10));
//! let a = locks.try_acquire_permit(&name, 2, ttl).await?.expect("free");
//! let b = locks.try_acquire_permit(&name, 2, ttl).await?.expect("one left");
//! assert!(locks.try_acquire_permit(&name, 2, ttl).await?.is_none()); // never a third
//! assert!(b.token() > a.token());
//!
//! let doc = LockName::new("docs/7")?;
//! let r1 = locks.try_read(&doc, ttl).await?.expect("readers share");
//! let r2 = locks.try_read(&doc, ttl).await?.expect("readers share");
//! assert!(locks.try_write(&doc, ttl).await?.is_none()); // not while anyone reads
//! # let _ = (r1, r2);
//! # Ok(()) }
//! ```

use std::time::Duration;

use async_trait::async_trait;

use crate::{Access, Acquisition, DistributedLock, Holding, Lease, LockError, LockName, waited};

/// A counting semaphore per name: at most `permits` unexpired leases at once.
///
/// Same rules as the mutex (server-side expiry, owner-checked renew and release,
/// fencing tokens increasing per name, cancel-safe waiting, FIFO where
/// [`crate::Capabilities::fair`]), with "one holder" read as "at most `permits`". The
/// count is part of the name's contract while anyone holds it (on the queue backends,
/// its oldest queued entry's): a caller of another count is refused
/// ([`LockError::PermitsMismatch`]) by a try, and a waiting caller waits until the
/// name is idle, then holds under its own count (a wait that runs out on a refusal ends
/// with `PermitsMismatch`, not `Timeout`). Backends without
/// [`crate::Capabilities::shared`] answer [`LockError::Unsupported`].
///
/// Every [`DistributedLock`] has these methods: each builds an [`Acquisition`] with an
/// [`Access::Permit`] and calls [`DistributedLock::acquire_with`].
#[async_trait]
pub trait DistributedSemaphore: DistributedLock {
    /// Takes one of the `permits` permits of `name` if one is free (and, on a fair
    /// backend, nobody is waiting); `Ok(None)` otherwise.
    ///
    /// # Errors
    /// `InvalidArgument` for a TTL or a count out of range (1 to
    /// [`crate::MAX_PERMITS`]); `PermitsMismatch`; `Unsupported`; a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    async fn try_acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        try_as(self, name, ttl, Access::Permit(permits)).await
    }

    /// Takes one of the `permits` permits of `name`, waiting up to `wait`.
    ///
    /// # Errors
    /// Those of [`DistributedSemaphore::try_acquire_permit`], and `Timeout` /
    /// `Unavailable` as [`DistributedLock::acquire`].
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`]: a dropped wait leaves no waiter behind.
    async fn acquire_permit(
        &self,
        name: &LockName,
        permits: u32,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        wait_as(self, name, ttl, Access::Permit(permits), wait).await
    }

    /// The current holders of `name`'s permits, oldest grant first.
    ///
    /// # Errors
    /// `Unsupported`; a backend error.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn permit_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.holders(name, Access::Permit(1)).await
    }
}

impl<T: DistributedLock + ?Sized> DistributedSemaphore for T {}

/// A read-write lock per name: any number of readers, or one writer.
///
/// Same rules as the mutex, with "one holder" read as "readers only, or one writer".
/// Writers do not starve: on a fair backend readers queue behind a waiting writer
/// (FIFO); on the others a waiting writer keeps new readers out while it waits. A
/// writer's fencing token is above every token granted before it. Backends without
/// [`crate::Capabilities::shared`] answer [`LockError::Unsupported`].
///
/// Every [`DistributedLock`] has these methods: each builds an [`Acquisition`] with
/// [`Access::Read`] or [`Access::Write`] and calls [`DistributedLock::acquire_with`].
#[async_trait]
pub trait DistributedRwLock: DistributedLock {
    /// Takes a read lease on `name` if no writer holds or waits for it.
    ///
    /// # Errors
    /// `InvalidArgument` for a TTL out of range; `Unsupported`; a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    async fn try_read(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        try_as(self, name, ttl, Access::Read).await
    }

    /// Takes a read lease on `name`, waiting up to `wait` for writers.
    ///
    /// # Errors
    /// As [`DistributedLock::acquire`], and `Unsupported`.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`].
    async fn read(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        wait_as(self, name, ttl, Access::Read, wait).await
    }

    /// Takes the write lease on `name` if nobody holds it (and, on a fair backend,
    /// nobody waits).
    ///
    /// # Errors
    /// `InvalidArgument` for a TTL out of range; `Unsupported`; a backend error.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::try_acquire`].
    async fn try_write(&self, name: &LockName, ttl: Duration) -> Result<Option<Lease>, LockError> {
        try_as(self, name, ttl, Access::Write).await
    }

    /// Takes the write lease on `name`, waiting up to `wait` for readers and writers.
    ///
    /// # Errors
    /// As [`DistributedLock::acquire`], and `Unsupported`.
    ///
    /// # Cancel safety
    /// As [`DistributedLock::acquire`].
    async fn write(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        wait_as(self, name, ttl, Access::Write, wait).await
    }

    /// The current holders of `name` (readers, or the writer), oldest grant first.
    ///
    /// # Errors
    /// `Unsupported`; a backend error.
    ///
    /// # Cancel safety
    /// A read: dropping it changes nothing.
    async fn rw_holders(&self, name: &LockName) -> Result<Vec<Holding>, LockError> {
        self.holders(name, Access::Read).await
    }
}

impl<T: DistributedLock + ?Sized> DistributedRwLock for T {}

/// Every primitive of a backend behind one object. Every [`DistributedLock`] is one
/// now (its semaphore and read-write calls are provided methods), so this is the
/// same object by another name, kept for code written against it.
pub trait Coordination: DistributedSemaphore + DistributedRwLock {}

impl<T: DistributedLock + ?Sized> Coordination for T {}

/// `lock`'s answer to one attempt at `access` on `name`.
async fn try_as<L: DistributedLock + ?Sized>(
    lock: &L,
    name: &LockName,
    ttl: Duration,
    access: Access,
) -> Result<Option<Lease>, LockError> {
    lock.acquire_with(&Acquisition::new(name, ttl).with_access(access))
        .await
}

/// `lock`'s lease for `access` on `name` after waiting up to `wait` (`Timeout` when
/// none came).
async fn wait_as<L: DistributedLock + ?Sized>(
    lock: &L,
    name: &LockName,
    ttl: Duration,
    access: Access,
    wait: Duration,
) -> Result<Lease, LockError> {
    let request = Acquisition::new(name, ttl)
        .with_access(access)
        .waiting(wait);
    waited(lock.acquire_with(&request).await, name, wait)
}
