//! `MemoryLock`: the process-local reference backend.

mod driver;
mod queue;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tokio::time::Instant;

use crate::backend::{Backend, Queues};
use crate::{Access, Capabilities, HolderValue, Holding, Lease, LockError, LockInfo, LockName};

use queue::Queue;

/// A process-local lock with the same semantics as the distributed backends:
/// FIFO-fair, TTL enforced by tokio time, a fencing counter per name that never goes
/// back, and push wake-up of exactly the waiters a change lets in. It offers the
/// semaphore and the read-write lock too ([`crate::DistributedSemaphore`],
/// [`crate::DistributedRwLock`]).
///
/// Clones share one lock table and behave like independent clients of one server;
/// [`MemoryLock::new`] creates a new, empty table. Inject it where a service takes an
/// `Arc<dyn DistributedLock>` to test it without a server. Names are never forgotten
/// (their fencing counters must survive), so the table grows with distinct names.
///
/// ```
/// use std::time::Duration;
/// use dlock_core::{DistributedLock, LockName, MemoryLock};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), dlock_core::LockError> {
/// let a = MemoryLock::new();
/// let b = a.clone(); // a second client of the same table
/// let name = LockName::new("jobs/nightly")?;
/// let lease = a.try_acquire(&name, Duration::from_secs(5)).await?.expect("free");
/// assert!(b.try_acquire(&name, Duration::from_secs(5)).await?.is_none());
/// a.release(&lease).await?;
/// let next = b.try_acquire(&name, Duration::from_secs(5)).await?.expect("free again");
/// assert!(next.token() > lease.token());
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct MemoryLock {
    table: Arc<Table>,
}

#[derive(Default)]
struct Table {
    queues: Mutex<HashMap<(Space, LockName), Queue>>,
    next_entry: AtomicU64,
}

/// The three primitives keep separate queues: a mutex, a semaphore and a read-write
/// lock of one name are different things.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Space {
    Mutex,
    Semaphore,
    RwLock,
}

impl From<Access> for Space {
    fn from(access: Access) -> Self {
        match access {
            Access::Permit(_) => Self::Semaphore,
            Access::Read | Access::Write => Self::RwLock,
            _ => Self::Mutex,
        }
    }
}

type QueueMap = HashMap<(Space, LockName), Queue>;

impl MemoryLock {
    /// A new, empty lock table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn queues(&self) -> MutexGuard<'_, QueueMap> {
        // A panic while holding this mutex cannot leave a queue half-updated in a way
        // that breaks exclusion (each update is a single push, assignment or removal),
        // so keep going.
        self.table
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on `name`'s queue of `access`'s primitive, expired holders dropped.
    fn with_queue<T>(
        &self,
        name: &LockName,
        access: Access,
        f: impl FnOnce(&mut Queue, Instant) -> T,
    ) -> T {
        let now = Instant::now();
        let mut queues = self.queues();
        let queue = queues
            .entry((Space::from(access), name.clone()))
            .or_default();
        queue.expire(name, now);
        f(queue, now)
    }
}

#[async_trait]
impl Backend for MemoryLock {
    type Family = Queues;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.with_queue(lease.name(), lease.access(), |q, now| {
            let entry = q
                .holder_of(lease, now)
                .ok_or_else(|| LockError::lease_lost(lease.name()))?;
            if let Some(h) = entry.held.as_mut() {
                h.expires_at = now + lease.ttl();
            }
            Ok(lease.renewed(lease.ttl(), now))
        })
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        Ok(self.with_queue(lease.name(), lease.access(), |q, now| {
            let Some(id) = q.holder_of(lease, now).map(|e| e.id) else {
                return false;
            };
            q.remove(lease.name(), id).is_some()
        }))
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Ok(self.with_queue(name, Access::Exclusive, |q, now| {
            q.holders(now).into_iter().next().map(|h| LockInfo {
                proclaimed: q.proclaimed(h.token),
                owner: h.owner,
                token: h.token,
                remaining: h.remaining,
            })
        }))
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        Ok(self.with_queue(name, of, |q, now| q.holders(now)))
    }

    async fn proclaim(&self, lease: &Lease, value: &HolderValue) -> Result<(), LockError> {
        crate::backend::proclaimable(self.backend_name(), lease)?;
        self.with_queue(lease.name(), lease.access(), |q, now| {
            let entry = q
                .holder_of(lease, now)
                .ok_or_else(|| LockError::lease_lost(lease.name()))?;
            entry.proclaimed = Some(value.clone());
            Ok(())
        })
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        crate::backend::break_claimed(self, name).await
    }

    /// The holder's entry keeps its place and expiry under the revoked mark of its
    /// owner id: it renews and releases nothing, and the queue moves on when it expires.
    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        Ok(self.with_queue(name, Access::Exclusive, |q, now| {
            let h = q.holders(now).into_iter().next()?;
            let info = LockInfo {
                proclaimed: q.proclaimed(h.token),
                owner: h.owner.clone(),
                token: h.token,
                remaining: h.remaining,
            };
            let lease = Lease::new(name.clone(), h.owner, h.token, h.remaining, now);
            let entry = q.holder_of(&lease, now)?;
            entry.owner = entry.owner.revoked();
            Some(info)
        }))
    }

    /// A memory lock is this process's own: no other process could take a ticket up.
    async fn hand_over(&self, lease: &Lease) -> Result<crate::Ticket, LockError> {
        let _ = lease;
        Err(crate::ticket::unsupported("memory"))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::per_lease()
            .with_fair(true)
            .with_notify(true)
            .with_shared(true)
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}
