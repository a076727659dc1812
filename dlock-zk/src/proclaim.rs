//! A holder's proclaimed value (`DistributedLock::proclaim`): the data of the
//! holder's node, written while the node is still its session's.

use dlock_core::{FencingToken, HolderValue, Lease, LockError};
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;

impl ZkLock {
    /// The node, read and still the lease's (its session's, created at the token),
    /// written at the version read, under the lease's write lock.
    pub(crate) async fn proclaim_value(
        &self,
        lease: &Lease,
        value: &HolderValue,
    ) -> Result<(), LockError> {
        dlock_core::backend::proclaimable("zookeeper", lease)?;
        let held = lease.renewable_data::<NodeLease>()?;
        if held.handed_over() {
            return Err(LockError::unsupported_feature(
                "zookeeper",
                "proclaiming a value for a lease handed over for a ticket",
            ));
        }
        let lost = || LockError::lease_lost(lease.name());
        let client = held.slot.session.get().await?;
        let ours = |s: &zk::Stat| -> Result<bool, LockError> {
            Ok(s.ephemeral_owner == client.session_id().0
                && FencingToken::from_signed(s.czxid, "czxid")? == lease.token())
        };
        let data = value.proclaimed_text();
        let _writing = held.writes.lock().await;
        // another write of the node's data in between (never a hand-over: it holds
        // `writes` too) only makes us read again
        for _ in 0..5 {
            // the data too: a revoked node's mark must not be written over
            let read = client.get_data(&held.path);
            let version = match self.op("read node", async { Ok(read.await) }).await? {
                Ok((data, s)) if ours(&s)? && data != crate::break_holder::REVOKED => s.version,
                Ok(_) | Err(zk::Error::NoNode) => return Err(lost()),
                Err(e) => return Err(from_zk("read node", e)),
            };
            let written = client.set_data(&held.path, data.as_bytes(), Some(version));
            match self.op("proclaim", async { Ok(written.await) }).await? {
                Ok(after) if ours(&after)? => return Ok(()),
                Ok(_) => return Err(lost()),
                Err(zk::Error::BadVersion) => {}
                Err(zk::Error::NoNode) => return Err(lost()),
                Err(e) => return Err(from_zk("proclaim", e)),
            }
        }
        Err(LockError::transient(format!(
            "proclaiming for {}: its node kept changing",
            lease.name()
        )))
    }
}
