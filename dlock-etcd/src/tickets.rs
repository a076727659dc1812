//! Tickets: a lease handed to another process (`dlock acquire`, then `dlock renew` and
//! `dlock release` elsewhere).
//!
//! A key is taken on the client's shared lease, which that client keeps alive for all
//! its locks and tracks in its own bookkeeping (renewals, the sweeper). Handing a key
//! over therefore first moves it to a lease of its own — a txn guarded by the key's
//! create revision, so it never touches a later holder's key, and a put keeps the
//! create revision: the queue order and the token stay — and drops it from this
//! client's bookkeeping, so this client neither renews nor sweeps it any more. The
//! moved key carries [`HANDED_OVER`] as its value: a resumer takes up only such a key,
//! whose lease is the key's alone, and keeps that lease alive; it never keeps alive a
//! lease that other keys share, so no lock outlives its crashed holder through a
//! ticket.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockError, Ticket};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::queue_dir;
use crate::lock::{KeyLease, revision};
use crate::session::bookkeeping::Lookup;

/// The value of a key handed over (other keys' values are empty).
pub(crate) const HANDED_OVER: &str = "dlock:handed-over";
/// The value of a handed-over key released with a linger (`release_after`): it blocks
/// the name a while longer, and no ticket takes it up again.
pub(crate) const RELEASED: &str = "dlock:released";
/// The value of a revoked holder's key (`DistributedLock::revoke_holder`): moved onto
/// a lease nobody renews, it blocks the name until that lease ends or the holder's
/// release deletes it; no ticket takes it up, no proclaim writes over it.
pub(crate) const REVOKED: &str = "dlock:revoked";

/// `ttl` in whole seconds, rounded up, as etcd grants leases (at least one).
fn lease_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis().div_ceil(1000))
        .unwrap_or(i64::MAX)
        .max(1)
}

/// Where a key is, read back after a move whose answer was lost.
enum Found {
    /// On this lease.
    On(i64),
    /// Gone, or taken again (another create revision).
    Gone,
}

/// Until disarmed, hands a key this client stopped tracking back to its sweeper: a
/// hand-over cut off between forgetting the key and settling the move must not leave
/// it on the shared lease, which this client keeps alive for its other keys. The
/// sweeper deletes it only while it is still on that lease. (If this client has
/// dropped the shared lease meanwhile — no keys, past its TTL — nothing keeps that
/// lease alive any more, and the key ends with it.)
struct Unsettled<'a> {
    lock: &'a EtcdLock,
    shared: i64,
    key: &'a str,
    armed: bool,
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.lock
                .leases
                .expect(self.shared, self.key, Instant::now());
        }
    }
}

impl EtcdLock {
    /// [`DistributedLock::hand_over`]: the key forgotten by this client, then moved
    /// to a lease of its own for the lease's TTL.
    pub(crate) async fn hand_over_key(&self, lease: &Lease) -> Result<Ticket, LockError> {
        let ticket = Ticket::of(self.backend_name(), lease)?;
        let lost = || LockError::lease_lost(lease.name());
        let held = lease.backend_data::<KeyLease>().ok_or_else(lost)?;
        if !lease.is_valid() {
            return Err(lost());
        }
        if held.own {
            return Ok(ticket); // taken up from a ticket: on a lease of its own already
        }
        let (shared, key, rev) = (held.lease_id, held.key.as_str(), revision(lease));
        match self.leases.lookup(shared, key, rev) {
            Lookup::Held { .. } => {}
            Lookup::Unknown => {
                return Err(LockError::InvalidArgument(format!(
                    "the lease on {} was acquired through another EtcdLock; hand it over there",
                    lease.name()
                )));
            }
            _ => return Err(lost()),
        }
        // forgotten before the move is sent, so no renewal of it here can outlast the
        // lease it moves to; handed back to the sweeper unless the move settles
        if !self.leases.release(shared, key, rev) {
            return Err(lost());
        }
        let mut unsettled = Unsettled {
            lock: self,
            shared,
            key,
            armed: true,
        };
        let secs = lease_secs(lease.ttl());
        let own = self.grant(secs).await?;
        let moved = self.move_key(key, rev, shared, own).await;
        match self.settle(key, rev, own, moved).await {
            Ok(Found::On(l)) if l == own => {
                unsettled.armed = false;
                Ok(ticket)
            }
            // still on the shared lease (the sweeper deletes it), or gone
            Ok(_) => {
                self.revoke(own).await;
                Err(lost())
            }
            // unknown: given up either way (see the trait's doc) — the sweeper deletes
            // it from the shared lease, the revoke from the new one
            Err(e) => {
                self.revoke(own).await;
                Err(e)
            }
        }
    }

    async fn grant(&self, secs: i64) -> Result<i64, LockError> {
        Ok(self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?
            .id())
    }

    /// Moves `key`, if it was created at `rev` and is on lease `from`, to lease `to`,
    /// marked handed over: whether it moved.
    async fn move_key(&self, key: &str, rev: i64, from: i64, to: i64) -> Result<bool, LockError> {
        Ok(self
            .rpc("hand over", |mut c| {
                let key = key.to_owned();
                async move {
                    let txn = Txn::new()
                        .when([
                            Compare::create_revision(key.clone(), CompareOp::Equal, rev),
                            Compare::lease(key.clone(), CompareOp::Equal, from),
                        ])
                        .and_then([TxnOp::put(
                            key,
                            HANDED_OVER,
                            Some(PutOptions::new().with_lease(to)),
                        )]);
                    c.txn(txn).await
                }
            })
            .await?
            .succeeded())
    }

    /// Where `key` is after a move to `to`: read back when the move's answer was lost
    /// (it may have committed) or refused (the key may have moved or gone meanwhile).
    /// `Ok(false)` as `moved` asks for the read alone.
    async fn settle(
        &self,
        key: &str,
        rev: i64,
        to: i64,
        moved: Result<bool, LockError>,
    ) -> Result<Found, LockError> {
        if let Ok(true) = moved {
            return Ok(Found::On(to));
        }
        let read = self
            .rpc("read key", |mut c| {
                let key = key.to_owned();
                async move { c.get(key, None).await }
            })
            .await;
        // neither the move's answer nor the key could be had: unknown
        Ok(read?
            .kvs()
            .first()
            .filter(|kv| kv.create_revision() == rev)
            .map_or(Found::Gone, |kv| Found::On(kv.lease())))
    }

    /// Whether `key`, created at `rev`, was handed over.
    pub(crate) async fn handed_over(&self, key: &str, rev: i64) -> Result<bool, LockError> {
        let found = self
            .rpc("read key", |mut c| {
                let key = key.to_owned();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(found
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev && kv.value() == HANDED_OVER.as_bytes()))
    }

    /// Revokes a lease of a handed-over key; best effort (it expires by its TTL).
    pub(crate) async fn revoke(&self, lease_id: i64) {
        let _ = self.try_revoke(lease_id).await;
    }

    /// Revokes a lease: whether it is gone (revoked now, or expired already).
    async fn try_revoke(&self, lease_id: i64) -> bool {
        match self
            .rpc("lease revoke", |mut c| async move {
                c.lease_revoke(lease_id).await
            })
            .await
        {
            Ok(_) => true,
            Err(e) => {
                let gone = match &e {
                    LockError::Backend {
                        source: Some(src), ..
                    }
                    | LockError::Unavailable {
                        source: Some(src), ..
                    } => src
                        .downcast_ref::<etcd_client::Error>()
                        .is_some_and(crate::errors::is_lease_not_found),
                    _ => false,
                };
                if !gone {
                    tracing::debug!(lease = lease_id, error = %e, "revoking a lease failed; it expires by its TTL");
                }
                gone
            }
        }
    }

    /// [`DistributedLock::resume`]: the ticket's key, if it heads its queue with the
    /// ticket's token and was handed over, valid for what its lease has left. A read.
    pub(crate) async fn resume_ticket(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        if ticket.backend() != self.backend_name() {
            return Err(ticket.foreign(self.backend_name()));
        }
        let lost = || LockError::lease_lost(ticket.name());
        let dir = queue_dir(&self.opts.prefix, ticket.name());
        let key = format!("{dir}{}", ticket.owner());
        let rev = i64::try_from(ticket.token().get()).map_err(|_| lost())?;
        let sent = Instant::now();
        let head = self.first_in_queue(&dir).await?.ok_or_else(lost)?;
        if head.key() != key.as_bytes() || head.create_revision() != rev {
            return Err(lost());
        }
        if head.value() == RELEASED.as_bytes() {
            return Err(lost());
        }
        if head.value() != HANDED_OVER.as_bytes() {
            return Err(LockError::InvalidArgument(format!(
                "the etcd lease on {} was not handed over: write its ticket with \
                 DistributedLock::hand_over (dlock acquire does)",
                ticket.name()
            )));
        }
        let own = head.lease();
        // whole seconds, rounded down (under a second left counts as gone); the grant
        // as the server keeps it, so a renewal knows whether it may keep the lease
        let ttl = self
            .rpc("lease ttl", |mut c| async move {
                c.lease_time_to_live(own, None).await
            })
            .await?;
        let (left, granted) = (ttl.ttl(), ttl.granted_ttl());
        if left <= 0 {
            return Err(lost());
        }
        // the key may have moved to another lease between the two reads (another
        // taker's renewal with a shorter TTL): what was read of this lease is then not
        // the key's
        let moved = self.settle(&key, rev, own, Ok(false)).await?;
        if !matches!(moved, Found::On(l) if l == own) {
            return Err(lost());
        }
        let left = Duration::from_secs(u64::try_from(left).unwrap_or(0));
        // valid from as long before the first read as the lease has run already
        let since = sent
            .checked_sub(ticket.ttl().saturating_sub(left))
            .ok_or_else(lost)?;
        Ok(Lease::new(
            ticket.name().clone(),
            ticket.owner().clone(),
            ticket.token(),
            ticket.ttl(),
            since,
        )
        .with_backend_data(Arc::new(KeyLease::own(own, key, granted))))
    }

    /// A renewal of a handed-over key: a keep-alive of its own lease when that lease
    /// was granted for this TTL, then a read that the key is still on it; else (a new
    /// TTL) a move to a new lease of that TTL, the old one revoked.
    pub(crate) async fn renew_own(
        &self,
        lease: &Lease,
        held: &KeyLease,
    ) -> Result<Lease, LockError> {
        let lost = || LockError::lease_lost(lease.name());
        let (rev, secs, sent) = (revision(lease), lease_secs(lease.ttl()), Instant::now());
        if held.granted_secs == secs {
            if !self.keep_alive(held.lease_id).await? {
                return Err(lost());
            }
            let key = held.key.clone();
            let found = self
                .rpc("read key", |mut c| {
                    let key = key.clone();
                    async move { c.get(key, None).await }
                })
                .await?;
            let on_it = found
                .kvs()
                .first()
                .is_some_and(|kv| kv.create_revision() == rev && kv.lease() == held.lease_id);
            if !on_it {
                return Err(lost());
            }
            return Ok(lease.renewed(lease.ttl(), sent));
        }
        let own = self.grant(secs).await?;
        let moved = self.move_key(&held.key, rev, held.lease_id, own).await;
        match self.settle(&held.key, rev, own, moved).await {
            Ok(Found::On(l)) if l == own => {
                self.revoke(held.lease_id).await;
                Ok(lease
                    .renewed(lease.ttl(), sent)
                    .with_backend_data(Arc::new(KeyLease::own(own, held.key.clone(), secs))))
            }
            Ok(Found::On(l)) if l == held.lease_id => {
                // the move seemed not to take, but an unanswered attempt may still
                // commit: only once the new lease is revoked and the key is read on
                // the old one again is the old lease as valid as before
                let still = self.try_revoke(own).await
                    && matches!(
                        self.settle(&held.key, rev, own, Ok(false)).await,
                        Ok(Found::On(l)) if l == held.lease_id
                    );
                if still {
                    Err(LockError::transient(format!(
                        "moving {} to a lease of the new TTL did not take; renew again",
                        lease.name()
                    )))
                } else {
                    Err(lost())
                }
            }
            // gone, or moved by another taker of the ticket
            Ok(_) => {
                self.revoke(own).await;
                Err(lost())
            }
            // unknown: the key may be on the new lease, which may end before the old
            // lease's valid_until — given up: both leases revoked, so it is lost
            Err(_) => {
                self.revoke(own).await;
                self.revoke(held.lease_id).await;
                Err(lost())
            }
        }
    }
}
