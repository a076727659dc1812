//! An operator revoking a holder (`DistributedLock::revoke_holder`: its key moved onto
//! a lease that ends on its own) or breaking it (`DistributedLock::break_holder`: its
//! key deleted, as its own release would delete it).

use std::time::Duration;

use dlock_core::backend::Backend;
use dlock_core::{LockError, LockInfo, LockName};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::EtcdLock;
use crate::keys::{escaped_prefix, owner_of, queue_dir};
use crate::session::bookkeeping::trusted_after_seen;
use crate::tickets::{HANDED_OVER, RELEASED, REVOKED};

/// The guard lease of a revoke whose holder's lease was granted `granted`: long enough
/// for the marker, the hold lease's grant and the move to follow it (a second past the
/// holder's TTL); a move that lands after it ended is refused, and retried.
#[must_use]
pub fn revoke_guard(granted: Duration) -> Duration {
    granted.saturating_add(Duration::from_secs(1))
}

/// The lease a revoked key is moved onto, for a guard lease granted `guard` and a
/// holder's lease granted `granted`: it is granted after the guard and outlives it by
/// [`trusted_after_seen`]`(granted)` — so a move that lands while the guard's marker
/// lives leaves the key there past the end of the holder's trust — and by a slack of
/// the holder's TTL, at least 5 s: the marker outlives its lease until the leader
/// revokes it (expired leases are revoked in batches, late under load), and a new
/// leader with thousands of leases spreads their new expiries over seconds, the
/// guard's possibly later than the hold's.
#[must_use]
pub fn revoke_hold(guard: Duration, granted: Duration) -> Duration {
    guard
        .saturating_add(trusted_after_seen(granted))
        .saturating_add(granted.max(Duration::from_secs(5)))
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

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
    /// lets go (its release deletes the key). The holder learns it from the next read
    /// of its lease's keys, and trusts its lock at most [`trusted_after_seen`] past the
    /// last read that still showed the key — sent before the move. So the move must
    /// land while that much of the new lease is left, however late it lands (an
    /// operator paused, a request delayed): a guard lease is granted first with a
    /// marker key on it, then the hold lease ([`revoke_hold`] past the guard's TTL),
    /// and the txn requires the marker; once the move landed, a keep-alive counts the
    /// hold lease from then. A ticket's key is refused (its `dlock renew` moves the
    /// key itself): break it.
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
                remaining: Duration::from_secs(u64::try_from(left.ttl()).unwrap_or(0)),
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
            let granted = secs(left.granted_ttl().max(left.ttl()));
            let (marker, own) = self.revoke_leases(name, granted).await?;
            let moved = self
                .rpc("revoke holder", |mut c| {
                    let (key, value, marker) = (key.clone(), value.clone(), marker.clone());
                    async move {
                        let txn = Txn::new()
                            .when([
                                Compare::create_revision(key.clone(), CompareOp::Equal, rev),
                                Compare::lease(key.clone(), CompareOp::Equal, lease),
                                Compare::value(key.clone(), CompareOp::Equal, value),
                                Compare::version(marker, CompareOp::Greater, 0),
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
                Ok(true) => Some(true),
                Ok(false) | Err(_) => self.key_is_on(&key, rev, own).await?,
            };
            match on_own {
                Some(true) => {
                    // Counted again from now: the hold lease then ends its whole TTL
                    // after the move, however late the guard's marker went or a new
                    // leader spread the leases' ends (the guard bounds it only if this
                    // keep-alive never lands).
                    if let Err(e) = self.keep_alive(own).await {
                        tracing::warn!(lock = %name, error = %e, "the keep-alive of a revoked key's lease failed; its guard still bounds it");
                    }
                    tracing::warn!(lock = %name, owner = %owner, token = %holder.token, backend = "etcd", "holder revoked");
                    return Ok(Some(holder));
                }
                // The holder's key is gone: it let go or its lease ended — perhaps
                // after a move whose answer was lost. Either way that holder is done;
                // whoever holds now is not the one asked about, and is not revoked.
                None => return Ok(None),
                Some(false) => {}
            }
            moved?;
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while revoking it; try again"
        )))
    }

    /// Grants a revoke's two leases for a holder lease of `granted`: the guard lease
    /// with its marker key on it (returned), then the hold lease (its id returned).
    async fn revoke_leases(
        &self,
        name: &LockName,
        granted: Duration,
    ) -> Result<(String, i64), LockError> {
        let guard = self.grant_for(revoke_guard(granted)).await?;
        let marker = format!(
            "{}{}",
            escaped_prefix(format!("{}%revoke/", self.opts.prefix), name.as_str()),
            format_args!("/{}", guard.0)
        );
        self.rpc("revoke marker", |mut c| {
            let marker = marker.clone();
            async move {
                c.put(marker, "", Some(PutOptions::new().with_lease(guard.0)))
                    .await
            }
        })
        .await?;
        let hold = self.grant_for(revoke_hold(guard.1, granted)).await?;
        Ok((marker, hold.0))
    }

    /// A lease of at least `ttl` (whole seconds, rounded up): its id and granted TTL.
    async fn grant_for(&self, ttl: Duration) -> Result<(i64, Duration), LockError> {
        let asked =
            i64::try_from(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).unwrap_or(i64::MAX);
        let resp = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(asked, None).await
            })
            .await?;
        Ok((resp.id(), secs(resp.ttl().max(asked))))
    }

    /// Whether the key `key` created at `rev` is on lease `lease` now; `None` when
    /// that key is gone.
    async fn key_is_on(&self, key: &[u8], rev: i64, lease: i64) -> Result<Option<bool>, LockError> {
        let found = self
            .rpc("read key", |mut c| {
                let key = key.to_vec();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(found
            .kvs()
            .first()
            .filter(|kv| kv.create_revision() == rev)
            .map(|kv| kv.lease() == lease))
    }
}
