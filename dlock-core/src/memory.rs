//! `MemoryLock`: the process-local reference backend.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backoff::Deadline;
use crate::{
    Capabilities, DistributedLock, FencingToken, Lease, LeaseScope, LockError, LockInfo, LockName,
    OwnerId, validate_ttl,
};

/// A process-local lock with the same semantics as the distributed backends:
/// FIFO-fair, TTL enforced by tokio time, a fencing counter per name that never goes
/// back, and push wake-up of the next waiter.
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
    slots: Mutex<HashMap<LockName, Slot>>,
    next_waiter: AtomicU64,
}

#[derive(Default)]
struct Slot {
    holder: Option<Holder>,
    last_token: u64,
    waiters: VecDeque<Waiter>,
}

struct Holder {
    owner: OwnerId,
    token: FencingToken,
    expires_at: Instant,
}

struct Waiter {
    id: u64,
    wake: Arc<Notify>,
}

impl Slot {
    fn expire(&mut self, now: Instant) {
        if self.holder.as_ref().is_some_and(|h| h.expires_at <= now) {
            self.holder = None;
        }
    }

    fn take(&mut self, owner: OwnerId, ttl: Duration, now: Instant) -> FencingToken {
        self.last_token += 1;
        let token = FencingToken::new(self.last_token);
        self.holder = Some(Holder {
            owner,
            token,
            expires_at: now + ttl,
        });
        token
    }

    fn holds(&self, lease: &Lease, now: Instant) -> bool {
        self.holder.as_ref().is_some_and(|h| {
            h.owner == *lease.owner() && h.token == lease.token() && h.expires_at > now
        })
    }

    fn wake_head_if_free(&self) {
        if self.holder.is_none()
            && let Some(head) = self.waiters.front()
        {
            head.wake.notify_one();
        }
    }
}

impl MemoryLock {
    /// A new, empty lock table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<LockName, Slot>> {
        // A panic while holding this mutex cannot leave a slot half-updated in a way
        // that breaks exclusion (each update is a single assignment), so keep going.
        self.table
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a waiter from its queue when `acquire` returns or its future is dropped,
/// and passes the turn on if the lock is free.
struct QueueSpot<'a> {
    lock: &'a MemoryLock,
    name: &'a LockName,
    id: u64,
}

impl Drop for QueueSpot<'_> {
    fn drop(&mut self) {
        let mut slots = self.lock.slots();
        if let Some(slot) = slots.get_mut(self.name)
            && let Some(pos) = slot.waiters.iter().position(|w| w.id == self.id)
        {
            slot.waiters.remove(pos);
            if pos == 0 {
                slot.wake_head_if_free();
            }
        }
    }
}

#[async_trait]
impl DistributedLock for MemoryLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        validate_ttl(ttl)?;
        let owner = OwnerId::random()?;
        let now = Instant::now();
        let mut slots = self.slots();
        let slot = slots.entry(name.clone()).or_default();
        slot.expire(now);
        if slot.holder.is_some() || !slot.waiters.is_empty() {
            return Ok(None);
        }
        let token = slot.take(owner.clone(), ttl, now);
        Ok(Some(Lease::new(name.clone(), owner, token, ttl, now)))
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        validate_ttl(ttl)?;
        let owner = OwnerId::random()?;
        let deadline = Deadline::after(wait);
        let id = self.table.next_waiter.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        let _spot = QueueSpot {
            lock: self,
            name,
            id,
        };
        let mut queued = false;
        loop {
            let now = Instant::now();
            let holder_expiry = {
                let mut slots = self.slots();
                let slot = slots.entry(name.clone()).or_default();
                slot.expire(now);
                let my_turn = slot.waiters.front().is_none_or(|w| w.id == id);
                if slot.holder.is_none() && my_turn {
                    if queued {
                        slot.waiters.pop_front();
                    }
                    let token = slot.take(owner.clone(), ttl, now);
                    return Ok(Lease::new(name.clone(), owner, token, ttl, now));
                }
                if !queued {
                    slot.waiters.push_back(Waiter {
                        id,
                        wake: Arc::clone(&wake),
                    });
                    queued = true;
                }
                slot.holder.as_ref().map(|h| h.expires_at)
            };
            if deadline.passed() {
                return Err(LockError::Timeout {
                    name: name.to_string(),
                    waited: deadline.waited(),
                });
            }
            let until = holder_expiry.map_or(deadline.end(), |e| e.min(deadline.end()));
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let slot = slots
            .get_mut(lease.name())
            .filter(|s| s.holds(lease, now))
            .ok_or_else(|| LockError::lease_lost(lease.name()))?;
        if let Some(h) = slot.holder.as_mut() {
            h.expires_at = now + lease.ttl();
        }
        Ok(lease.renewed(lease.ttl(), now))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(lease.name()) else {
            return Ok(false);
        };
        if !slot.holds(lease, now) {
            return Ok(false);
        }
        slot.holder = None;
        slot.wake_head_if_free();
        Ok(true)
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(name) else {
            return Ok(None);
        };
        slot.expire(now);
        Ok(slot.holder.as_ref().map(|h| LockInfo {
            owner: h.owner.clone(),
            token: h.token,
            remaining: h.expires_at.saturating_duration_since(now),
        }))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, LeaseScope::PerLease, true)
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}
