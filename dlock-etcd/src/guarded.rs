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
    /// [`LockError::LeaseLost`] when the guard failed (nothing written);
    /// [`LockError::Unavailable`] when an unanswered attempt was retried and the guard
    /// then failed (the first may have committed); a server error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent leaves the write applied or not (whole:
    /// one script or one transaction): read before writing again.
    pub async fn guarded_txn(
        &self,
        lease: &Lease,
        ops: Vec<TxnOp>,
    ) -> Result<TxnResponse, LockError> {
        // token 0 is no lease of etcd's (a fallback's): a missing key's create
        // revision is 0, so the compare below would pass
        let rev = i64::try_from(lease.token().get())
            .ok()
            .filter(|r| *r > 0)
            .ok_or_else(|| LockError::lease_lost(lease.name()))?;
        let key = self.holder_key(lease);
        let (resp, first) = self
            .rpc_attempts("guarded txn", |mut c| {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
                    .and_then(ops.clone());
                async move { c.txn(txn).await }
            })
            .await?;
        match (resp.succeeded(), first) {
            (true, _) => Ok(resp),
            (false, true) => Err(LockError::lease_lost(lease.name())),
            // an earlier attempt may have committed before the lease went
            (false, false) => Err(LockError::transient(format!(
                "guarded txn on {}: an unanswered attempt may have committed before the lease went",
                lease.name()
            ))),
        }
    }
}
