//! An operator revoking a holder (`DistributedLock::revoke_holder`: its key moved onto
//! a lease that ends on its own) or breaking it (`DistributedLock::break_holder`: its
//! key deleted, as its own release would delete it).

use dlock_core::backend::Backend;
use dlock_core::{LockError, LockInfo, LockName};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::EtcdLock;
use crate::keys::{owner_of, queue_dir};

impl EtcdLock {
    /// Deletes the key of `name`'s holder in a txn guarded by its create revision (the
    /// holder's token), so it never deletes a later holder's key; the next in line is
    /// woken by the delete as by a release, and gets a higher revision. The broken
    /// client's next renewal finds its key gone (its lease's keys are read back at
    /// each refresh) and reports the lease lost.
    pub(crate) async fn break_head(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        for _ in 0..5 {
            let Some(holder) = Backend::inspect(self, name).await? else {
                return Ok(None);
            };
            let key = format!("{}{}", queue_dir(&self.opts.prefix, name), holder.owner);
            let rev = i64::try_from(holder.token.get())
                .map_err(|_| LockError::backend("break holder", "token beyond etcd's revisions"))?;
            let deleted = self
                .rpc("break holder", |mut c| {
                    let key = key.clone();
                    async move {
                        let txn = Txn::new()
                            .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
                            .and_then([TxnOp::delete(key, None)]);
                        c.txn(txn).await
                    }
                })
                .await?
                .succeeded();
            if deleted {
                tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = "etcd", "holder broken");
                return Ok(Some(holder));
            }
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while breaking it; try again"
        )))
    }

    /// Moves the key of `name`'s holder onto a lease of its own that nobody renews, in
    /// a txn guarded by the key's create revision (the holder's token) and its lease.
    /// The key keeps its place at the head of the queue: no waiter moves until it ends
    /// with that lease, or the holder lets go (its release deletes the key). The holder
    /// learns it from the read of its lease's keys that follows its next refresh; that
    /// refresh comes within its TTL and lets it believe one TTL more, so the lease is
    /// granted for twice the holder lease's TTL and a second: a waiter gets in after
    /// the holder stopped believing, as long as that first read is answered.
    pub(crate) async fn revoke_head(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.opts.prefix, name);
        for _ in 0..5 {
            let Some(head) = self.first_in_queue(&dir).await? else {
                return Ok(None);
            };
            let (key, rev, lease) = (head.key().to_vec(), head.create_revision(), head.lease());
            let left = self
                .rpc("lease ttl", |mut c| async move {
                    c.lease_time_to_live(lease, None).await
                })
                .await?;
            if left.ttl() < 0 {
                continue; // expired: the next in line is the head now, or nobody
            }
            let holder = LockInfo {
                owner: dlock_core::OwnerId::from_stored(&owner_of(&key)),
                token: dlock_core::FencingToken::from_signed(rev, "create revision")?,
                remaining: std::time::Duration::from_secs(u64::try_from(left.ttl()).unwrap_or(0)),
                proclaimed: dlock_core::HolderValue::from_proclaimed(head.value()),
            };
            let ttl = 2 * left.granted_ttl().max(left.ttl()) + 1;
            let own = self
                .rpc("lease grant", |mut c| async move {
                    c.lease_grant(ttl, None).await
                })
                .await?
                .id();
            let moved = self
                .rpc("revoke holder", |mut c| {
                    let key = key.clone();
                    async move {
                        let txn = Txn::new()
                            .when([
                                Compare::create_revision(key.clone(), CompareOp::Equal, rev),
                                Compare::lease(key.clone(), CompareOp::Equal, lease),
                            ])
                            .and_then([TxnOp::put(
                                key,
                                "",
                                Some(PutOptions::new().with_lease(own).with_ignore_value()),
                            )]);
                        c.txn(txn).await
                    }
                })
                .await
                .map(|r| r.succeeded());
            match moved {
                Ok(true) => {
                    tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = "etcd", "holder revoked");
                    return Ok(Some(holder));
                }
                Ok(false) => self.revoke(own).await,
                Err(e) => {
                    self.revoke(own).await;
                    return Err(e);
                }
            }
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while revoking it; try again"
        )))
    }
}
