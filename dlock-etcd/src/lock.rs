//! The lock algorithm: keys on the client's shared lease for the TTL, a queue of keys
//! ordered by create revision, a watch on the immediate predecessor.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::new_acquisition;
use dlock_core::backend::queue::{QueueDriver, Turn, queue};
use dlock_core::{
    Capabilities, DistributedLock, FencingToken, Lease, LeaseScope, LockError, LockInfo, LockName,
    OwnerId, drift_margin,
};
use etcd_client::KeyValue;
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::{owner_of, queue_dir};
use crate::leases::Ticket;
use crate::queue::gets;
use crate::shared::Lookup;

/// What an etcd lease carries inside a [`Lease`].
#[derive(Debug)]
struct Held {
    lease_id: i64,
}

/// A key that may exist and is not handed to the caller yet: if the acquisition fails,
/// times out or is dropped, the key is deleted now (which wakes the next waiter), and
/// once more by the sweeper after the operation timeout, in case a create retried after
/// a lost reply lands late.
struct PendingKey {
    lock: EtcdLock,
    lease: i64,
    key: String,
    armed: bool,
}

impl PendingKey {
    fn disarm(mut self) {
        self.armed = false;
    }

    /// The create was answered and did not happen: nothing to clean up.
    fn never_created(mut self) {
        self.armed = false;
        self.lock.leases.forget(self.lease, &self.key);
    }
}

impl Drop for PendingKey {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let late = Instant::now() + self.lock.opts.timeout;
        self.lock.leases.abandon(self.lease, &self.key, late);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (lock, key) = (self.lock.clone(), self.key.clone());
            rt.spawn(async move {
                let _ = lock
                    .rpc("delete abandoned key", |mut c| {
                        let key = key.clone();
                        async move { c.delete(key, None).await }
                    })
                    .await;
            });
        }
    }
}

/// The create revision of the lease's key: its fencing token.
fn revision(lease: &Lease) -> i64 {
    i64::try_from(lease.token().get()).unwrap_or(i64::MAX)
}

impl EtcdLock {
    /// The queue key of the lease's holder.
    fn holder_key(&self, lease: &Lease) -> String {
        format!(
            "{}{}",
            queue_dir(&self.opts.prefix, lease.name()),
            lease.owner()
        )
    }

    /// A new acquisition's key on the shared lease, noted before it is sent.
    async fn prepare(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<(String, String, Ticket, PendingKey), LockError> {
        let dir = queue_dir(&self.opts.prefix, name);
        let key = format!("{dir}{owner}");
        let ticket = self.lease_for(ttl).await?;
        self.leases
            .expect(ticket.id, &key, Instant::now() + ticket.granted);
        let pending = PendingKey {
            lock: self.clone(),
            lease: ticket.id,
            key: key.clone(),
            armed: true,
        };
        Ok((dir, key, ticket, pending))
    }

    /// Hands out the lease of a key that holds the lock: valid from the shared lease's
    /// last refresh, which is refreshed first if that is too long ago.
    async fn hand_out(
        &self,
        name: &LockName,
        owner: OwnerId,
        key: &str,
        rev: i64,
        ticket: Ticket,
    ) -> Result<Lease, LockError> {
        let mut refreshed = ticket.refreshed;
        let mut lease = Lease::new(
            name.clone(),
            owner,
            FencingToken::from_signed(rev, "create revision")?,
            ticket.granted,
            refreshed,
        );
        if !lease.is_valid() {
            self.keep_key(ticket.id, key, rev, ticket.granted).await?;
            if let Lookup::Held { refreshed: r, .. } = self.leases.lookup(ticket.id, key, rev) {
                refreshed = r;
            }
            lease = lease.renewed(ticket.granted, refreshed);
            if !lease.is_valid() {
                // the key is no longer known as held: never hand out a lease that is
                // already past its validity (rule 5)
                return Err(LockError::transient(format!(
                    "the grant of {name} could not be confirmed in time"
                )));
            }
        }
        self.leases
            .confirm(ticket.id, key, rev, Instant::now() + ticket.granted);
        Ok(lease.with_backend_data(Arc::new(Held {
            lease_id: ticket.id,
        })))
    }

    /// Whether `key` is certainly still on the server: not swept or deleted as far as
    /// the client knows, on a lease whose last refresh is recent enough that the server
    /// cannot have expired it.
    fn surely_alive(&self, id: i64, key: &str, rev: i64) -> bool {
        match self.leases.lookup(id, key, rev) {
            Lookup::Held {
                granted, refreshed, ..
            } => Instant::now() < refreshed + granted - drift_margin(granted),
            _ => false,
        }
    }

    /// Refreshes the shared lease and moves our key's deadline a TTL ahead; fails if
    /// the key is no longer ours.
    async fn keep_key(
        &self,
        id: i64,
        key: &str,
        rev: i64,
        granted: Duration,
    ) -> Result<(), LockError> {
        let Lookup::Held { gate, .. } = self.leases.lookup(id, key, rev) else {
            return Err(LockError::transient(
                "the queued request expired while waiting",
            ));
        };
        self.refresh_shared(id, &gate).await?;
        if self.leases.extend(id, key, rev, Instant::now() + granted) {
            Ok(())
        } else {
            Err(LockError::transient(
                "the queued request expired while waiting",
            ))
        }
    }
}

/// One acquisition's key in a lock's queue; dropped before its grant, the key is
/// deleted (see `PendingKey`).
pub struct EtcdEntry {
    name: LockName,
    owner: OwnerId,
    dir: String,
    key: String,
    ticket: Ticket,
    /// The key's create revision: its place in line, and its fencing token.
    rev: i64,
    pending: Option<PendingKey>,
}

impl std::fmt::Debug for EtcdEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdEntry")
            .field("key", &self.key)
            .field("rev", &self.rev)
            .finish_non_exhaustive()
    }
}

/// Uncontended, `acquire` is one txn (create our key if the queue is empty, else queue
/// it and read the head) on a lease already at hand; release is one delete. A waiter
/// watches the key right before its own and keeps its key alive with the shared lease.
#[async_trait]
impl QueueDriver for EtcdLock {
    type Entry = EtcdEntry;

    async fn enqueue(
        &self,
        name: &LockName,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<(EtcdEntry, Turn), LockError> {
        let (dir, key, ticket, pending) = self.prepare(name, owner, ttl).await?;
        let queued = self.join_queue(name, &dir, &key, ticket.id).await?;
        // a waiter's key is confirmed, so the sweeper and the attachment checks track it
        self.leases.confirm(
            ticket.id,
            &key,
            queued.revision,
            Instant::now() + ticket.granted,
        );
        let turn = if queued.head == Some(queued.revision) {
            Turn::Head
        } else {
            Turn::Behind
        };
        let entry = EtcdEntry {
            name: name.clone(),
            owner: owner.clone(),
            dir,
            key,
            ticket,
            rev: queued.revision,
            pending: Some(pending),
        };
        Ok((entry, turn))
    }

    async fn next_turn(&self, e: &mut EtcdEntry, until: Instant) -> Result<Turn, LockError> {
        let at_head = |head: Option<KeyValue>| {
            if head.map(|kv| kv.create_revision()) == Some(e.rev) {
                Turn::Head
            } else {
                Turn::Behind
            }
        };
        let Some(pred) = self.predecessor(&e.dir, e.rev).await? else {
            // Nothing queued before us any more: we are the head now, or our key is
            // gone (deleted behind our back, or swept after a pause) — then looking
            // again would find the same thing until the wait runs out.
            return match at_head(self.first_in_queue(&e.dir).await?) {
                Turn::Head => Ok(Turn::Head),
                Turn::Behind => Err(LockError::transient(format!(
                    "the queued request for {} vanished while waiting",
                    e.name
                ))),
            };
        };
        let (id, granted) = (e.ticket.id, e.ticket.granted);
        let keep = || self.keep_key(id, &e.key, e.rev, granted);
        self.wait_for_delete(pred.key(), granted / 3, keep, until)
            .await?;
        Ok(at_head(self.first_in_queue(&e.dir).await?))
    }

    async fn grant(&self, e: &mut EtcdEntry, waited: bool) -> Result<Option<Lease>, LockError> {
        // After waiting, make sure our key (and so our place) still exists
        // (etcd#11456) — unless the client knows it does: still ours, on a lease
        // that cannot have expired since its last refresh.
        if waited
            && !self.surely_alive(e.ticket.id, &e.key, e.rev)
            && !self.key_has_revision(&e.key, e.rev).await?
        {
            return Err(LockError::transient(format!(
                "the queued request for {} expired while waiting",
                e.name
            )));
        }
        let lease = self
            .hand_out(&e.name, e.owner.clone(), &e.key, e.rev, e.ticket)
            .await?;
        if let Some(p) = e.pending.take() {
            p.disarm();
        }
        Ok(Some(lease))
    }
}

#[async_trait]
impl DistributedLock for EtcdLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let owner = new_acquisition(ttl)?;
        let (dir, key, ticket, pending) = self.prepare(name, &owner, ttl).await?;
        let (resp, first_attempt) = self.take_if_free(&dir, &key, ticket.id).await?;
        let my_rev = if resp.succeeded() {
            resp.header().map_or(0, |h| h.revision())
        } else {
            // our own put may have landed before a lost reply: then we are first in line
            let g = gets(&resp);
            let mine = g
                .first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            let first = g
                .get(1)
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            match (mine, first) {
                (Some(m), Some(f)) if m == f => m,
                // busy, and the only attempt did not write our key
                (None, _) if first_attempt => {
                    pending.never_created();
                    return Ok(None);
                }
                // busy after a retry: an earlier attempt might still land, so the key is
                // deleted now and swept again later
                // or queued behind someone after a lost reply: deleted now and later
                _ => return Ok(None),
            }
        };
        let lease = self.hand_out(name, owner, &key, my_rev, ticket).await?;
        pending.disarm();
        Ok(Some(lease))
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        queue(self, name, ttl, wait).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Err(LockError::lease_lost(lease.name()));
        };
        let (id, rev, key) = (held.lease_id, revision(lease), self.holder_key(lease));
        match self.leases.lookup(id, &key, rev) {
            Lookup::Held { granted, gate, .. } => {
                // the first renewal of a tick refreshes the shared lease for all
                self.refresh_shared(id, &gate).await?;
                match self.leases.lookup(id, &key, rev) {
                    Lookup::Held { refreshed, .. }
                        if self.leases.extend(id, &key, rev, Instant::now() + granted) =>
                    {
                        Ok(lease.renewed(granted, refreshed))
                    }
                    _ => Err(LockError::lease_lost(lease.name())),
                }
            }
            Lookup::NotHeld => Err(LockError::lease_lost(lease.name())),
            // Another client's lease: its expiry is kept by that client, which alone
            // can extend it.
            Lookup::Unknown => {
                // boxed: the common path above should not carry the space of an RPC
                if Box::pin(self.key_has_revision(&key, rev)).await? {
                    Err(LockError::InvalidArgument(format!(
                        "the lease on {} was acquired through another EtcdLock; renew it there",
                        lease.name()
                    )))
                } else {
                    Err(LockError::lease_lost(lease.name()))
                }
            }
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Ok(false);
        };
        let (id, rev, key) = (held.lease_id, revision(lease), self.holder_key(lease));
        let ours = self.leases.release(id, &key, rev);
        // Deleting our key wakes the next in line. The key carries this acquisition's
        // owner id, which nobody else ever writes, so a plain delete is owner-checked.
        let deleted = self
            .rpc("release", |mut c| {
                let key = key.clone();
                async move { c.delete(key, None).await }
            })
            .await;
        match deleted {
            Ok(resp) => Ok(resp.deleted() > 0),
            Err(e) => {
                if ours {
                    // the sweeper keeps trying, while the shared lease lives
                    self.leases.expect(id, &key, Instant::now());
                }
                Err(e)
            }
        }
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.opts.prefix, name);
        let Some(head) = self.first_in_queue(&dir).await? else {
            return Ok(None);
        };
        let lease_id = head.lease();
        let ttl = self
            .rpc("lease ttl", |mut c| async move {
                c.lease_time_to_live(lease_id, None).await
            })
            .await?
            .ttl();
        // whole seconds, rounded down: 0 means "under a second", -1 "expired"
        if ttl < 0 {
            return Ok(None);
        }
        Ok(Some(LockInfo {
            owner: OwnerId::from_stored(&owner_of(head.key())),
            token: FencingToken::from_signed(head.create_revision(), "create revision")?,
            remaining: Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
        }))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, LeaseScope::PerLease, true).with_batched_renewals(true)
    }

    fn backend_name(&self) -> &'static str {
        "etcd"
    }
}
