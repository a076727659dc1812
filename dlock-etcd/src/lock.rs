//! The lock algorithm: keys on the client's shared lease for the TTL, a queue of keys
//! ordered by create revision, a watch on the immediate predecessor.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::queue::Turn;
use dlock_core::backend::{Backend, Queues, Standing};
use dlock_core::{
    Access, Capabilities, FencingToken, Holding, Lease, LockError, LockInfo, LockName, OwnerId,
};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::{dir_for, owner_of, queue_dir};
use crate::queue::EtcdEntry;
use crate::session::bookkeeping::Lookup;
use crate::session::leases::SharedLease;
use crate::shared::stand;

/// What an etcd lease carries inside a [`Lease`].
#[derive(Debug)]
pub(crate) struct KeyLease {
    pub(crate) lease_id: i64,
    /// The holder's key, kept so that a renewal does not build it again.
    pub(crate) key: String,
    /// The key was handed over (`tickets.rs`): its lease is its own, kept alive by
    /// whoever took the ticket up, not this client's shared lease.
    pub(crate) own: bool,
    /// The TTL the own lease was granted for, in seconds (0 for a shared lease).
    pub(crate) granted_secs: i64,
}

impl KeyLease {
    /// A handed-over key on its own lease `lease_id`, granted for `granted_secs`.
    pub(crate) fn own(lease_id: i64, key: String, granted_secs: i64) -> Self {
        Self {
            lease_id,
            key,
            own: true,
            granted_secs,
        }
    }
}

/// A renewal refreshes the client's shared etcd lease once per tick for every lock on
/// it; a release deletes the key (owner-checked by its unique name); `inspect` reads the
/// head of the queue and its lease's TTL. Acquiring is the queue driver (`queue_driver.rs`).
#[async_trait]
impl Backend for EtcdLock {
    type Family = Queues;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let held = lease.renewable_data::<KeyLease>()?;
        if held.own {
            return self.renew_own(lease, held).await;
        }
        let (id, rev, key) = (held.lease_id, revision(lease), held.key.as_str());
        // most renewals of a tick find the shared lease just refreshed by the first
        if let Some((granted, refreshed, seen_bound)) = self.leases.renew_if_fresh(id, key, rev) {
            return trusted(lease.renewed(granted, refreshed).narrowed(seen_bound));
        }
        match self.leases.lookup(id, key, rev) {
            Lookup::Held { granted, gate, .. } => {
                // the first renewal of a tick refreshes the shared lease for all
                self.refresh_shared(id, &gate).await?;
                match self.leases.lookup(id, key, rev) {
                    Lookup::Held {
                        refreshed,
                        seen_bound,
                        ..
                    } if self.leases.extend(id, key, rev, Instant::now() + granted) => {
                        trusted(lease.renewed(granted, refreshed).narrowed(seen_bound))
                    }
                    _ => Err(LockError::lease_lost(lease.name())),
                }
            }
            Lookup::NotHeld => Err(LockError::lease_lost(lease.name())),
            // Another client's lease: its expiry is kept by that client, which alone
            // can extend it.
            Lookup::Unknown => {
                // boxed: the common path above should not carry the space of an RPC
                // a key this client handed over is no longer its to renew
                if Box::pin(self.handed_over(key, rev)).await? {
                    Err(LockError::lease_lost(lease.name()))
                } else if Box::pin(self.key_has_revision(key, rev)).await? {
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
        let Some(held) = lease.backend_data::<KeyLease>() else {
            return Ok(false);
        };
        let (id, rev, key) = (held.lease_id, revision(lease), self.holder_key(lease));
        let ours = self.leases.release(id, &key, rev);
        // Deleting our key wakes the next in line. The key carries this acquisition's
        // owner id, which nobody else ever writes, so a plain delete is owner-checked.
        // A key an operator revoked is deleted too (we let go: the name frees at once)
        // but was no longer ours: its previous value says so.
        let deleted = self
            .rpc("release", |mut c| {
                let key = key.clone();
                async move {
                    let prev = etcd_client::DeleteOptions::new().with_prev_key();
                    c.delete(key, Some(prev)).await
                }
            })
            .await;
        match deleted {
            Ok(resp) => {
                if held.own {
                    // the handed-over key's own lease: nothing else is on it
                    self.revoke(id).await;
                }
                let revoked = resp
                    .prev_kvs()
                    .first()
                    .is_some_and(|kv| kv.value() == crate::tickets::REVOKED.as_bytes());
                Ok(resp.deleted() > 0 && !revoked)
            }
            Err(e) => {
                if ours {
                    // the sweeper keeps trying, while the shared lease lives
                    self.leases.expect(id, &key, Instant::now());
                }
                Err(e)
            }
        }
    }

    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        let Some(held) = lease.backend_data::<KeyLease>() else {
            return Ok(false);
        };
        if linger.is_zero() {
            return Backend::release(self, lease).await;
        }
        let (id, rev, key) = (held.lease_id, revision(lease), self.holder_key(lease));
        let released = self.release_lingering(lease, key, rev, id, linger).await;
        if held.own && matches!(released, Ok(true)) {
            self.revoke(id).await; // the key lingers on a lease of its own now
        }
        released
    }

    async fn hand_over(&self, lease: &Lease) -> Result<dlock_core::Ticket, LockError> {
        self.hand_over_key(lease).await
    }

    async fn resume(&self, ticket: &dlock_core::Ticket) -> Result<Lease, LockError> {
        self.resume_ticket(ticket).await
    }

    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        self.proclaim_value(lease, value).await
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
        let owner = OwnerId::from_stored(&owner_of(head.key()));
        Ok(Some(LockInfo {
            owner: if head.value() == crate::tickets::REVOKED.as_bytes() {
                owner.revoked()
            } else {
                owner
            },
            token: FencingToken::from_signed(head.create_revision(), "create revision")?,
            remaining: Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
            proclaimed: dlock_core::HolderValue::from_proclaimed(head.value()),
        }))
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.shared_holders(name, of).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.break_head(name).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.revoke_head(name).await
    }

    /// The cluster's version, leader, members and alarms (`doctor.rs`).
    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        self.findings().await
    }

    /// Every mutex queue under the prefix, read keys only in one range; each name's
    /// holder inspected; the rest of its queue are its waiters.
    async fn list(&self, prefix: &str) -> Result<Vec<dlock_core::Held>, LockError> {
        let root = self.opts.prefix.clone();
        let resp = self
            .keys_from(crate::keys::escaped_prefix(root.clone(), prefix))
            .await?;
        let mut queues: std::collections::BTreeMap<String, usize> = Default::default();
        for kv in resp.kvs() {
            if let Some(name) = crate::keys::name_of(&root, kv.key()) {
                *queues.entry(name).or_default() += 1;
            }
        }
        let mut held = Vec::new();
        for (name, queued) in queues {
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            if let Some(holder) = Backend::inspect(self, &name).await? {
                held.push(dlock_core::Held::new(name, holder, Some(queued - 1)));
            }
        }
        held.extend(self.listed_shared(prefix).await?);
        held.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        Ok(held)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::per_lease()
            .with_fair(true)
            .with_notify(true)
            .with_batched_renewals(true)
            .with_shared(true)
    }

    fn backend_name(&self) -> &'static str {
        "etcd"
    }
}

/// A renewed lease, unless the bound from the last read of its lease's keys that still
/// showed the key has already passed: then the renewal cannot vouch for the key (it
/// may have been moved off the lease), and is retried as a transient failure until
/// the lease's validity ends or a read answers.
fn trusted(renewed: Lease) -> Result<Lease, LockError> {
    if renewed.is_valid() {
        Ok(renewed)
    } else {
        Err(LockError::transient(
            "the keys on the shared etcd lease went unread for too long to vouch for this lock",
        ))
    }
}

/// The create revision of the lease's key: its fencing token.
pub(crate) fn revision(lease: &Lease) -> i64 {
    i64::try_from(lease.token().get()).unwrap_or(i64::MAX)
}

impl EtcdLock {
    /// The queue key of the lease's holder.
    pub(crate) fn holder_key(&self, lease: &Lease) -> String {
        let dir = dir_for(&self.opts.prefix, lease.name(), lease.access());
        format!("{dir}{}", lease.owner())
    }

    /// A shared entry's next turn: the keys ahead read again, and a wait on those the
    /// queue rule names.
    pub(crate) async fn next_shared_turn(
        &self,
        e: &EtcdEntry,
        until: Instant,
    ) -> Result<Turn, LockError> {
        let (here, keys) = stand(&e.name, e.access, &self.ahead_of(&e.dir, e.rev).await?)?;
        if here == Standing::Holds {
            return Ok(Turn::Head);
        }
        let (id, granted) = (e.ticket.id, e.ticket.granted);
        let keep = || self.keep_key(id, &e.key, e.rev, granted);
        self.wait_for_any_delete(&e.dir, e.rev, keys, granted / 3, keep, until)
            .await?;
        let ahead = self.ahead_of(&e.dir, e.rev).await?;
        Ok(match stand(&e.name, e.access, &ahead)?.0 {
            Standing::Holds => Turn::Head,
            Standing::Waits(_) => Turn::Behind,
        })
    }

    /// Hands out the lease of a key that holds the lock: valid from the shared lease's
    /// last refresh, which is refreshed first if that is too long ago.
    pub(crate) async fn hand_out(
        &self,
        name: &LockName,
        owner: OwnerId,
        key: &str,
        rev: i64,
        ticket: SharedLease,
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
            let mut bound = None;
            if let Lookup::Held {
                refreshed: r,
                seen_bound,
                ..
            } = self.leases.lookup(ticket.id, key, rev)
            {
                (refreshed, bound) = (r, Some(seen_bound));
            }
            lease = lease.renewed(ticket.granted, refreshed);
            if let Some(b) = bound {
                lease = lease.narrowed(b);
            }
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
        Ok(lease.with_backend_data(Arc::new(KeyLease {
            lease_id: ticket.id,
            key: key.to_owned(),
            own: false,
            granted_secs: 0,
        })))
    }
}
