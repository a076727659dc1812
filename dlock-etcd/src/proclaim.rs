//! A holder's proclaimed value (`DistributedLock::proclaim`, etcd's own `Proclaim`):
//! the value of the holder's key, written while the key is still the lease's.

use dlock_core::{HolderValue, Lease, LockError};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::EtcdLock;
use crate::lock::KeyLease;
use crate::tickets::{HANDED_OVER, RELEASED, REVOKED};

impl EtcdLock {
    /// One transaction: the key still created at the lease's token, neither handed
    /// over nor released, takes the value (on the lease it has).
    pub(crate) async fn proclaim_value(
        &self,
        lease: &Lease,
        value: &HolderValue,
    ) -> Result<(), LockError> {
        dlock_core::backend::proclaimable("etcd", lease)?;
        let held = lease.renewable_data::<KeyLease>()?;
        if held.own {
            return Err(LockError::unsupported_feature(
                "etcd",
                "proclaiming a value for a lease handed over for a ticket",
            ));
        }
        let rev =
            i64::try_from(lease.token().get()).map_err(|_| LockError::lease_lost(lease.name()))?;
        let written = value.proclaimed_text();
        let succeeded = self
            .rpc("proclaim", |mut c| {
                let (key, written) = (held.key.clone(), written.clone());
                async move {
                    let txn = Txn::new()
                        .when([
                            Compare::create_revision(key.clone(), CompareOp::Equal, rev),
                            Compare::value(key.clone(), CompareOp::NotEqual, HANDED_OVER),
                            Compare::value(key.clone(), CompareOp::NotEqual, RELEASED),
                            Compare::value(key.clone(), CompareOp::NotEqual, REVOKED),
                        ])
                        .and_then([TxnOp::put(
                            key,
                            written,
                            Some(PutOptions::new().with_ignore_lease()),
                        )]);
                    c.txn(txn).await
                }
            })
            .await?
            .succeeded();
        if succeeded {
            Ok(())
        } else {
            Err(LockError::lease_lost(lease.name()))
        }
    }
}
