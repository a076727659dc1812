//! Tickets: a lease carried to another process (`dlock acquire`, then `dlock renew` and
//! `dlock release` elsewhere).
//!
//! A key is taken on the client's shared lease, which that client keeps alive — and
//! which nobody keeps alive once it exits. The process that takes a ticket up moves the
//! key to a lease of its own (a txn guarded by the key's create revision, so it never
//! touches a later holder's key, and a put keeps the create revision: the queue order
//! and the token stay). Each renewal moves it again, to a fresh lease of the full TTL,
//! and revokes the one before: a lease that other keys share is never kept alive for
//! them, so no lock outlives its crashed holder through a ticket.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockError, Ticket};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::queue_dir;
use crate::lock::KeyLease;

/// `ttl` in whole seconds, rounded up, as etcd grants leases (at least one).
pub(crate) fn lease_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis().div_ceil(1000))
        .unwrap_or(i64::MAX)
        .max(1)
}

impl EtcdLock {
    /// Moves `key`, if its create revision is still `rev`, to a new lease of `secs`
    /// seconds; the new lease's id, or `None` when the key is gone (the new lease is
    /// revoked then).
    pub(crate) async fn move_to_own_lease(
        &self,
        key: &str,
        rev: i64,
        secs: i64,
    ) -> Result<Option<i64>, LockError> {
        let own = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?
            .id();
        let moved = self
            .rpc("move key", |mut c| {
                let key = key.to_owned();
                async move {
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
                        .and_then([TxnOp::put(
                            key,
                            "",
                            Some(PutOptions::new().with_lease(own).with_ignore_value()),
                        )]);
                    c.txn(txn).await
                }
            })
            .await?
            .succeeded();
        if moved {
            Ok(Some(own))
        } else {
            self.revoke(own).await;
            Ok(None)
        }
    }

    /// Revokes a lease no key of a holder uses any more; best effort (it expires by its
    /// TTL otherwise).
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

    /// [`DistributedLock::resume`]: the ticket's key, if it still heads its queue with
    /// the ticket's token, moved to a lease of its own for what its lease had left.
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
        let taken_on = head.lease();
        // whole seconds, rounded down: under a second left is as good as gone
        let left = self
            .rpc("lease ttl", |mut c| async move {
                c.lease_time_to_live(taken_on, None).await
            })
            .await?
            .ttl();
        if left <= 0 {
            return Err(lost());
        }
        // the same time left, on a lease nobody else's key shares
        let own = self
            .move_to_own_lease(&key, rev, left)
            .await?
            .ok_or_else(lost)?;
        let left = Duration::from_secs(u64::try_from(left).unwrap_or(0));
        let granted = sent
            .checked_sub(ticket.ttl().saturating_sub(left))
            .unwrap_or(sent);
        Ok(Lease::new(
            ticket.name().clone(),
            ticket.owner().clone(),
            ticket.token(),
            ticket.ttl(),
            granted,
        )
        .with_backend_data(Arc::new(KeyLease::own(own, key))))
    }

    /// A renewal of a lease taken up from a ticket: the key moved to a fresh lease of
    /// the full TTL, the previous one revoked.
    pub(crate) async fn renew_own(
        &self,
        lease: &Lease,
        held: &KeyLease,
        rev: i64,
    ) -> Result<Lease, LockError> {
        let sent = Instant::now();
        let Some(own) = self
            .move_to_own_lease(&held.key, rev, lease_secs(lease.ttl()))
            .await?
        else {
            return Err(LockError::lease_lost(lease.name()));
        };
        self.revoke(held.lease_id).await;
        Ok(Lease::new(
            lease.name().clone(),
            lease.owner().clone(),
            lease.token(),
            lease.ttl(),
            sent,
        )
        .with_backend_data(Arc::new(KeyLease::own(own, held.key.clone()))))
    }
}
