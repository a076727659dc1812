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

/// The value of a key handed over (other keys' values are empty).
const HANDED_OVER: &str = "dlock:handed-over";

/// `ttl` in whole seconds, rounded up, as etcd grants leases (at least one).
fn lease_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis().div_ceil(1000))
        .unwrap_or(i64::MAX)
        .max(1)
}

impl EtcdLock {
    /// [`DistributedLock::hand_over`]: the key moved to a lease of its own for the
    /// lease's TTL, and forgotten by this client.
    pub(crate) async fn hand_over_key(&self, lease: &Lease) -> Result<Ticket, LockError> {
        let ticket = Ticket::of(self.backend_name(), lease)?;
        let lost = || LockError::lease_lost(lease.name());
        let held = lease.backend_data::<KeyLease>().ok_or_else(lost)?;
        if held.own {
            return Ok(ticket); // taken up from a ticket: on a lease of its own already
        }
        let rev = revision(lease);
        let secs = lease_secs(lease.ttl());
        if self
            .move_to_own_lease(&held.key, rev, None, secs)
            .await?
            .is_none()
        {
            return Err(lost());
        }
        let _ = self.leases.release(held.lease_id, &held.key, rev);
        Ok(ticket)
    }

    /// Moves `key`, if its create revision is still `rev` (and its lease `from`, when
    /// given), to a new lease of `secs` seconds, marked handed over; the new lease's
    /// id, or `None` when the key is not so (the new lease is revoked then).
    async fn move_to_own_lease(
        &self,
        key: &str,
        rev: i64,
        from: Option<i64>,
        secs: i64,
    ) -> Result<Option<i64>, LockError> {
        let own = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?
            .id();
        let moved = self
            .rpc("hand over", |mut c| {
                let key = key.to_owned();
                async move {
                    let mut guards =
                        vec![Compare::create_revision(key.clone(), CompareOp::Equal, rev)];
                    if let Some(from) = from {
                        guards.push(Compare::lease(key.clone(), CompareOp::Equal, from));
                    }
                    let txn = Txn::new().when(guards).and_then([TxnOp::put(
                        key,
                        HANDED_OVER,
                        Some(PutOptions::new().with_lease(own)),
                    )]);
                    c.txn(txn).await
                }
            })
            .await;
        match moved {
            Ok(resp) if resp.succeeded() => Ok(Some(own)),
            other => {
                self.revoke(own).await;
                other.map(|_| None)
            }
        }
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
        if let Err(e) = self
            .rpc("lease revoke", |mut c| async move {
                c.lease_revoke(lease_id).await
            })
            .await
        {
            tracing::debug!(lease = lease_id, error = %e, "revoking a lease failed; it expires by its TTL");
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
        let left = Duration::from_secs(u64::try_from(left).unwrap_or(0));
        let since = sent
            .checked_sub(ticket.ttl().saturating_sub(left))
            .unwrap_or(sent);
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
        let Some(own) = self
            .move_to_own_lease(&held.key, rev, Some(held.lease_id), secs)
            .await?
        else {
            return Err(lost());
        };
        self.revoke(held.lease_id).await;
        Ok(lease
            .renewed(lease.ttl(), sent)
            .with_backend_data(Arc::new(KeyLease::own(own, held.key.clone(), secs))))
    }
}
