//! An operator breaking a holder (`DistributedLock::break_holder`): its key deleted,
//! as its own release would delete it.

use dlock_core::backend::Backend;
use dlock_core::{LockError, LockInfo, LockName};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use crate::EtcdLock;
use crate::keys::queue_dir;

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
}
