//! A release that keeps the name blocked a while (lock-delay), and waiting for a
//! holder to go (leader observers).

use std::time::Duration;

use dlock_core::{Lease, LockError, LockInfo, LockName};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::queue_dir;

/// How often a watch on a holder is backed by a fresh read, in case the stream went
/// quiet without telling.
const HOLDER_REREAD: Duration = Duration::from_secs(1);

impl EtcdLock {
    /// Moves the holder's key from the client's shared lease to a lease of its own
    /// that expires after `linger` (rounded up to whole seconds, as etcd counts): the
    /// server frees the name then, whatever becomes of this client. The move is a txn
    /// guarded by the key's create revision, so it never touches a later holder's key,
    /// and a put keeps the create revision (the queue order and the token).
    pub(crate) async fn release_lingering(
        &self,
        lease: &Lease,
        key: String,
        rev: i64,
        shared_lease: i64,
        linger: Duration,
    ) -> Result<bool, LockError> {
        let secs = i64::try_from(linger.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1);
        let own = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?
            .id();
        let moved = self
            .rpc("linger", |mut c| {
                let key = key.clone();
                async move {
                    let on_own = || PutOptions::new().with_lease(own);
                    // a handed-over key is marked released: no ticket's to take up
                    // again (other values — a shared holder's tag — stay)
                    let unmark = Txn::new()
                        .when([Compare::value(
                            key.clone(),
                            CompareOp::Equal,
                            crate::tickets::HANDED_OVER,
                        )])
                        .and_then([TxnOp::put(
                            key.clone(),
                            crate::tickets::RELEASED,
                            Some(on_own()),
                        )])
                        .or_else([TxnOp::put(
                            key.clone(),
                            "",
                            Some(on_own().with_ignore_value()),
                        )]);
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
                        .and_then([TxnOp::txn(unmark)]);
                    c.txn(txn).await
                }
            })
            .await?
            .succeeded();
        if moved {
            // no longer on the shared lease: stop keeping it
            let _ = self.leases.release(shared_lease, &key, rev);
        } else {
            let _ = self
                .rpc(
                    "lease revoke",
                    |mut c| async move { c.lease_revoke(own).await },
                )
                .await;
            tracing::debug!(lock = %lease.name(), "lingering release found the lease gone");
        }
        Ok(moved)
    }

    /// Waits until `holder`'s key in `name`'s queue is deleted (released, or its lease
    /// expired) or written again (a proclaimed value), or `until`: on the queue's
    /// watch, in place before the key is read, so nothing after that read is missed;
    /// read again each [`HOLDER_REREAD`] in case the watch went quiet.
    pub(crate) async fn wait_holder_gone(
        &self,
        name: &LockName,
        holder: &LockInfo,
        until: Instant,
    ) -> Result<(), LockError> {
        let key = format!("{}{}", queue_dir(&self.opts.prefix, name), holder.owner);
        let Ok(watched) = self.watches.on_delete(&key, self.opts.timeout).await else {
            // no watch: the caller looks again, after a pause so that is not a spin
            tokio::time::sleep(HOLDER_REREAD.min(until.saturating_duration_since(Instant::now())))
                .await;
            return Ok(());
        };
        loop {
            if self.holder_moved(&key, holder).await? {
                return Ok(());
            }
            tokio::select! {
                () = watched.subscription.notified() => return Ok(()),
                () = tokio::time::sleep(HOLDER_REREAD) => {}
                () = tokio::time::sleep_until(until) => return Ok(()),
            }
        }
    }

    /// Whether `key` is no longer `holder`'s as seen: gone, recreated, or carrying
    /// another proclaimed value.
    async fn holder_moved(&self, key: &str, holder: &LockInfo) -> Result<bool, LockError> {
        let read = self
            .rpc("read key", |mut c| {
                let key = key.to_owned();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(match read.kvs().first() {
            Some(kv) => {
                u64::try_from(kv.create_revision()).ok() != Some(holder.token.get())
                    || dlock_core::HolderValue::from_proclaimed(kv.value()) != holder.proclaimed
            }
            None => true,
        })
    }
}
