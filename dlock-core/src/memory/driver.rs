//! The memory table as a queue driver: an entry waits until the queue rule lets it
//! hold, woken by the release or expiry that lets it in.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::MemoryLock;
use super::queue::Entry;
use crate::backend::queue::{QueueDriver, Turn};
use crate::backend::{AttemptRequest, Standing};
use crate::{Access, Lease, LockError, LockName, OwnerId};

/// One `acquire`'s place in a queue; dropped before its grant, it leaves the queue and
/// wakes whoever that lets in.
pub struct MemoryEntry {
    lock: MemoryLock,
    name: LockName,
    access: Access,
    owner: OwnerId,
    ttl: Duration,
    id: u64,
    wake: Arc<Notify>,
    granted: bool,
}

impl std::fmt::Debug for MemoryEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryEntry")
            .field("name", &self.name)
            .field("access", &self.access)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl MemoryEntry {
    /// Where the entry stands, and when the earliest lease ahead of it runs out.
    fn turn(&self) -> Result<(Turn, Option<Instant>), LockError> {
        self.lock.with_queue(&self.name, self.access, |q, _| {
            let Some(index) = q.position(self.id) else {
                return Err(LockError::transient(format!(
                    "the queued request for {} vanished",
                    self.name
                )));
            };
            let turn = match q.standing_at(&self.name, index)? {
                Standing::Holds => Turn::Head,
                Standing::Waits(_) => Turn::Behind,
            };
            Ok((turn, q.first_expiry(index)))
        })
    }
}

impl Drop for MemoryEntry {
    fn drop(&mut self) {
        if !self.granted {
            let (name, id) = (self.name.clone(), self.id);
            self.lock
                .with_queue(&name, self.access, |q, _| q.remove(&name, id));
        }
    }
}

#[async_trait]
impl QueueDriver for MemoryLock {
    type Entry = MemoryEntry;

    async fn try_take(&self, request: &AttemptRequest<'_>) -> Result<Option<Lease>, LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let id = self.table.next_entry.fetch_add(1, Ordering::Relaxed);
        self.with_queue(name, access, |q, now| {
            // behind everyone queued: a try never barges past a waiter
            if q.standing_of(name, access, q.len())? != Standing::Holds {
                return Ok(None);
            }
            let index = q.push(Entry {
                id,
                owner: owner.clone(),
                access,
                held: None,
                wake: Arc::new(Notify::new()),
                proclaimed: None,
            });
            let token = q
                .grant(index, ttl, now)
                .ok_or_else(|| LockError::backend_msg("memory queue lost an entry"))?;
            let lease = Lease::new(name.clone(), owner.clone(), token, ttl, now);
            Ok(Some(lease.with_access(access)))
        })
    }

    async fn enqueue(
        &self,
        request: &AttemptRequest<'_>,
    ) -> Result<(MemoryEntry, Turn), LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let id = self.table.next_entry.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        self.with_queue(name, access, |q, _| {
            q.push(Entry {
                id,
                owner: owner.clone(),
                access,
                held: None,
                wake: Arc::clone(&wake),
                proclaimed: None,
            })
        });
        let entry = MemoryEntry {
            lock: self.clone(),
            name: name.clone(),
            access,
            owner: owner.clone(),
            ttl,
            id,
            wake,
            granted: false,
        };
        let (turn, _) = entry.turn()?;
        Ok((entry, turn))
    }

    async fn next_turn(&self, entry: &mut MemoryEntry, until: Instant) -> Result<Turn, LockError> {
        let (turn, expiry) = entry.turn()?;
        if turn == Turn::Head {
            return Ok(turn);
        }
        let wake_at = expiry.map_or(until, |e| e.min(until));
        tokio::select! {
            () = entry.wake.notified() => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
        Ok(entry.turn()?.0)
    }

    async fn grant(
        &self,
        entry: &mut MemoryEntry,
        _waited: bool,
    ) -> Result<Option<Lease>, LockError> {
        let (name, access, id, ttl) = (entry.name.clone(), entry.access, entry.id, entry.ttl);
        let token = self.with_queue(&name, access, |q, now| {
            let Some(index) = q.position(id) else {
                return Ok(None);
            };
            if q.standing_at(&name, index)? != Standing::Holds {
                return Ok(None);
            }
            Ok(q.grant(index, ttl, now).map(|t| (t, now)))
        })?;
        Ok(token.map(|(token, now)| {
            entry.granted = true;
            Lease::new(name, entry.owner.clone(), token, ttl, now).with_access(access)
        }))
    }
}
