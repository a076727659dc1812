//! A holder's proclaimed value (`DistributedLock::proclaim`): the data of the
//! holder's node, written while the node is still its session's.

use dlock_core::{FencingToken, HolderValue, Lease, LockError};
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::lock::NodeLease;

impl ZkLock {
    /// The node, read and still the lease's (its session's, created at the token),
    /// written at the version read.
    pub(crate) async fn proclaim_value(
        &self,
        lease: &Lease,
        value: &HolderValue,
    ) -> Result<(), LockError> {
        dlock_core::backend::proclaimable("zookeeper", lease)?;
        let held = lease.renewable_data::<NodeLease>()?;
        if held.handed_over {
            return Err(LockError::unsupported_feature(
                "zookeeper",
                "proclaiming a value for a lease handed over for a ticket",
            ));
        }
        let lost = || LockError::lease_lost(lease.name());
        let client = held.slot.session.get().await?;
        let read = client.check_stat(&held.path);
        let version = match self.op("read node", read).await? {
            Some(s)
                if s.ephemeral_owner == client.session_id().0
                    && FencingToken::from_signed(s.czxid, "czxid")? == lease.token() =>
            {
                s.version
            }
            _ => return Err(lost()),
        };
        let data = value.proclaimed_text();
        let written = client.set_data(&held.path, data.as_bytes(), Some(version));
        match self.op("proclaim", async { Ok(written.await) }).await? {
            Ok(_) => Ok(()),
            // changed since the read: handed over, or proclaimed by another call
            Err(zk::Error::BadVersion | zk::Error::NoNode) => Err(lost()),
            Err(e) => Err(from_zk("proclaim", e)),
        }
    }
}
