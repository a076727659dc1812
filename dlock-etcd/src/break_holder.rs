//! An operator revoking a holder (`DistributedLock::revoke_holder`: its key moved onto
//! a lease that ends on its own) or breaking it (`DistributedLock::break_holder`: its
//! key deleted, as its own release would delete it).

use dlock_core::backend::Backend;
use dlock_core::{LockError, LockInfo, LockName};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::EtcdLock;
use crate::keys::{owner_of, queue_dir};
use crate::tickets::{HANDED_OVER, RELEASED, REVOKED};

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

    /// Moves the key of `name`'s holder onto a lease of its own that nobody renews,
    /// with [`REVOKED`] as its value, in a txn guarded by the key's create revision
    /// (the holder's token), its lease and its value. The key keeps its place at the
    /// head of the queue: no waiter moves until it ends with that lease, or the holder
    /// lets go (its release deletes the key). The holder learns it from the read of
    /// its lease's keys that follows its next refresh; that refresh comes within its
    /// TTL and lets it believe one TTL more, so the lease is granted for twice the
    /// holder lease's TTL and a second. A ticket's key is refused (its `dlock renew`
    /// moves the key itself): break it.
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
            let owner = dlock_core::OwnerId::from_stored(&owner_of(&key));
            let mut holder = LockInfo {
                owner: owner.clone(),
                token: dlock_core::FencingToken::from_signed(rev, "create revision")?,
                remaining: std::time::Duration::from_secs(u64::try_from(left.ttl()).unwrap_or(0)),
                proclaimed: dlock_core::HolderValue::from_proclaimed(head.value()),
            };
            let value = head.value().to_vec();
            if value == REVOKED.as_bytes() || value == RELEASED.as_bytes() {
                // revoked already, or let go and lingering: nothing more to stop
                holder.owner = if value == REVOKED.as_bytes() {
                    owner.revoked()
                } else {
                    owner
                };
                return Ok(Some(holder));
            }
            if value == HANDED_OVER.as_bytes() {
                return Err(LockError::unsupported_feature(
                    "etcd",
                    "revoking the holder of a ticket (its renewals move its key): break it",
                ));
            }
            let ttl = 2 * left.granted_ttl().max(left.ttl()) + 1;
            let own = self
                .rpc("lease grant", |mut c| async move {
                    c.lease_grant(ttl, None).await
                })
                .await?
                .id();
            let moved = self
                .rpc("revoke holder", |mut c| {
                    let (key, value) = (key.clone(), value.clone());
                    async move {
                        let txn = Txn::new()
                            .when([
                                Compare::create_revision(key.clone(), CompareOp::Equal, rev),
                                Compare::lease(key.clone(), CompareOp::Equal, lease),
                                Compare::value(key.clone(), CompareOp::Equal, value),
                            ])
                            .and_then([TxnOp::put(
                                key,
                                REVOKED,
                                Some(PutOptions::new().with_lease(own)),
                            )]);
                        c.txn(txn).await
                    }
                })
                .await
                .map(|r| r.succeeded());
            // A refusal may follow an attempt that committed but whose answer was lost
            // (the call is retried): the key is read back. `own` is never revoked on a
            // doubt — the key may be on it — it just ends by itself.
            let on_own = match moved {
                Ok(true) => true,
                Ok(false) | Err(_) => self.key_is_on(&key, rev, own).await?,
            };
            if on_own {
                tracing::warn!(lock = %name, owner = %owner, token = %holder.token, backend = "etcd", "holder revoked");
                return Ok(Some(holder));
            }
            moved?;
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while revoking it; try again"
        )))
    }

    /// Whether the key `key` created at `rev` is on lease `lease` now.
    async fn key_is_on(&self, key: &[u8], rev: i64, lease: i64) -> Result<bool, LockError> {
        let found = self
            .rpc("read key", |mut c| {
                let key = key.to_vec();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(found
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev && kv.lease() == lease))
    }
}
