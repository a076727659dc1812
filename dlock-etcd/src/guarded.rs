//! Writes guarded by the lock: an etcd transaction that commits only while the lease's
//! key exists with its create revision (etcd's `IsOwner`).

use dlock_core::{Lease, LockError};
use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnResponse};

use crate::EtcdLock;

impl EtcdLock {
    /// Commits `ops` in one transaction guarded by `lease`: only if the lease's key
    /// still exists with the create revision that is its fencing token. If the lease is
    /// gone (expired, released, taken over) nothing is written. Stronger than a token
    /// check: it fails the moment the lease is gone, not when a later holder has
    /// written. An attempt left unanswered is sent again (to another member): etcd's
    /// puts and deletes are idempotent, so keep to them.
    ///
    /// ```no_run
    /// use dlock_etcd::etcd_client::TxnOp;
    /// # async fn save(lock: dlock_etcd::EtcdLock, lease: dlock_core::Lease) -> Result<(), dlock_core::LockError> {
    /// lock.guarded_txn(&lease, vec![TxnOp::put("app/leader", "10.0.0.7:9092", None)])
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when the guard failed (nothing written); a server
    /// error.
    pub async fn guarded_txn(
        &self,
        lease: &Lease,
        ops: Vec<TxnOp>,
    ) -> Result<TxnResponse, LockError> {
        let key = self.holder_key(lease);
        let rev =
            i64::try_from(lease.token().get()).map_err(|_| LockError::lease_lost(lease.name()))?;
        let resp = self
            .rpc("guarded txn", |mut c| {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
                    .and_then(ops.clone());
                async move { c.txn(txn).await }
            })
            .await?;
        if resp.succeeded() {
            Ok(resp)
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }
}
