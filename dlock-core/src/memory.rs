//! `MemoryLock`: the process-local reference backend.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::queue::{QueueDriver, Turn};
use crate::backend::{Backend, Queues};
use crate::{Capabilities, FencingToken, Lease, LockError, LockInfo, LockName, OwnerId};

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

/// One `acquire`'s place in a lock's queue; dropped before its grant, it leaves the
/// queue and passes the turn on if the lock is free.
pub struct MemoryEntry {
    lock: MemoryLock,
    name: LockName,
    owner: OwnerId,
    ttl: Duration,
    id: u64,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for MemoryEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryEntry")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl MemoryEntry {
    /// Where the entry stands, and when the holder's lease runs out.
    fn turn(&self) -> (Turn, Option<Instant>) {
        let now = Instant::now();
        let mut slots = self.lock.slots();
        let slot = slots.entry(self.name.clone()).or_default();
        slot.expire(now);
        let first = slot.waiters.front().is_some_and(|w| w.id == self.id);
        let turn = if first && slot.holder.is_none() {
            Turn::Head
        } else {
            Turn::Behind
        };
        (turn, slot.holder.as_ref().map(|h| h.expires_at))
    }
}

impl Drop for MemoryEntry {
    fn drop(&mut self) {
        let mut slots = self.lock.slots();
        if let Some(slot) = slots.get_mut(&self.name)
            && let Some(pos) = slot.waiters.iter().position(|w| w.id == self.id)
        {
            slot.waiters.remove(pos);
            if pos == 0 {
                slot.wake_head_if_free();
            }
        }
    }
}

/// The table's queue: waiters in line behind the holder, the first woken by a release
/// (or by its holder's expiry, which it sleeps until).
#[async_trait]
impl QueueDriver for MemoryLock {
    type Entry = MemoryEntry;

    async fn try_take(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let slot = slots.entry(name.clone()).or_default();
        slot.expire(now);
        if slot.holder.is_some() || !slot.waiters.is_empty() {
            return Ok(None);
        }
        let token = slot.take(owner.clone(), ttl, now);
        Ok(Some(Lease::new(
            name.clone(),
            owner.clone(),
            token,
            ttl,
            now,
        )))
    }

    async fn enqueue(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<(MemoryEntry, Turn), LockError> {
        let id = self.table.next_waiter.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        self.slots()
            .entry(name.clone())
            .or_default()
            .waiters
            .push_back(Waiter {
                id,
                wake: Arc::clone(&wake),
            });
        let entry = MemoryEntry {
            lock: self.clone(),
            name: name.clone(),
            owner: owner.clone(),
            ttl,
            id,
            wake,
        };
        let (turn, _) = entry.turn();
        Ok((entry, turn))
    }

    async fn next_turn(&self, entry: &mut MemoryEntry, until: Instant) -> Result<Turn, LockError> {
        let (turn, holder_expiry) = entry.turn();
        if turn == Turn::Head {
            return Ok(turn);
        }
        let wake_at = holder_expiry.map_or(until, |e| e.min(until));
        tokio::select! {
            () = entry.wake.notified() => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
        Ok(entry.turn().0)
    }

    async fn grant(
        &self,
        entry: &mut MemoryEntry,
        _waited: bool,
    ) -> Result<Option<Lease>, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let slot = slots.entry(entry.name.clone()).or_default();
        slot.expire(now);
        if slot.holder.is_some() || slot.waiters.front().is_none_or(|w| w.id != entry.id) {
            return Ok(None);
        }
        slot.waiters.pop_front();
        let token = slot.take(entry.owner.clone(), entry.ttl, now);
        Ok(Some(Lease::new(
            entry.name.clone(),
            entry.owner.clone(),
            token,
            entry.ttl,
            now,
        )))
    }
}

#[async_trait]
impl Backend for MemoryLock {
    type Family = Queues;

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
        Capabilities::per_lease().with_fair(true).with_notify(true)
    }

    fn backend_name(&self) -> &'static str {
        "memory"
    }
}
