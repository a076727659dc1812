//! Writes guarded by the lock: a ZooKeeper multi that commits only while the lease's
//! node exists.

use dlock_core::{Lease, LockError};
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;

impl ZkLock {
    /// Commits the operations `ops` adds to a multi, together with a check that
    /// `lease`'s node still exists — in one atomic multi: if the lease is gone (its
    /// session expired, it was released, a later holder took over) nothing is written.
    /// Stronger than a token check: it fails the moment the lease is gone, not when a
    /// later holder has written.
    ///
    /// ```no_run
    /// # async fn save(lock: dlock_zk::ZkLock, lease: dlock_core::Lease) -> Result<(), dlock_core::LockError> {
    /// lock.guarded_multi(&lease, |w| {
    ///     w.add_set_data("/app/config/leader", b"10.0.0.7:9092", None)
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::LeaseLost`] when the lease's node or its session is gone (nothing
    /// written);
    /// [`LockError::InvalidArgument`] when `ops` refuses (a bad path); the multi's
    /// error otherwise.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent leaves the write applied or not (whole:
    /// one script or one transaction): read before writing again.
    pub async fn guarded_multi<F>(
        &self,
        lease: &Lease,
        ops: F,
    ) -> Result<Vec<zk::MultiWriteResult>, LockError>
    where
        F: FnOnce(&mut zk::MultiWriter<'_>) -> Result<(), zk::Error>,
    {
        let held = lease.renewable_data::<NodeLease>()?;
        let client = held.slot.session.get().await?;
        let mut writer = client.new_multi_writer();
        writer
            .add_check_version(&held.path, -1)
            .map_err(|e| from_zk("guarded multi", e))?;
        ops(&mut writer).map_err(|e| LockError::InvalidArgument(format!("guarded multi: {e}")))?;
        match self
            .op("guarded multi", async { Ok(writer.commit().await) })
            .await?
        {
            Ok(results) => Ok(results),
            Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                Err(LockError::lease_lost(lease.name()))
            }
            Err(zk::MultiWriteError::OperationFailed { index, source }) => Err(from_zk(
                &format!("guarded multi, operation {index}"),
                source,
            )),
            // the lease's node was ephemeral to that session: it is gone with it, and a
            // request refused for an expired session was not applied
            Err(zk::MultiWriteError::RequestFailed {
                source: zk::Error::SessionExpired,
            }) => Err(LockError::lease_lost(lease.name())),
            Err(zk::MultiWriteError::RequestFailed { source }) => {
                Err(from_zk("guarded multi", source))
            }
        }
    }
}
