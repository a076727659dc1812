//! An operator revoking a holder (`DistributedLock::revoke_holder`: its node's data
//! becomes a mark its renewals refuse) or breaking it (`DistributedLock::break_holder`:
//! its node deleted, as its own release would delete it).

use dlock_core::{LockError, LockInfo, LockName};
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::path::{lowest, queue_dir};

/// The data of a revoked holder's node. A renewal that reads it reports the lease
/// lost; the node stays, keeping the name, until its holder lets go or its session
/// ends. (Proclaimed values start `dlock:value=`, tickets' data `dlock:handed-over`.)
pub(crate) const REVOKED: &[u8] = b"dlock:revoked";

impl ZkLock {
    /// Deletes the lowest node of `name`'s queue — the holder's; its name is unique to
    /// the acquisition (sequence number and owner id), so a later holder's node is
    /// never touched. The next in line watches exactly that node and takes over; its
    /// node's czxid (its token) is higher. The broken client's next renewal (a read of
    /// its node) finds it gone and reports the lease lost.
    pub(crate) async fn break_head(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.root, name);
        let client = self.sessions.first().session.get().await?;
        for _ in 0..5 {
            let children = match self
                .op("list queue", async { Ok(client.list_children(&dir).await) })
                .await?
            {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(from_zk("list queue", e)),
            };
            let Some(head) = lowest(&children) else {
                return Ok(None);
            };
            let path = format!("{dir}/{head}");
            let Some(holder) = self.read_holder(&client, &dir, head).await? else {
                continue;
            };
            match self
                .op("break holder", async {
                    Ok(client.delete(&path, None).await)
                })
                .await?
            {
                Ok(()) => {
                    tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = "zookeeper", "holder broken");
                    return Ok(Some(holder));
                }
                Err(zk::Error::NoNode) => {}
                // a ticket's node, kept by its renewals: deleted with them
                Err(zk::Error::NotEmpty) => {
                    if self.delete_ticket_node(&client, &path, None).await? {
                        tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = "zookeeper", "holder broken");
                        return Ok(Some(holder));
                    }
                }
                Err(e) => return Err(from_zk("break holder", e)),
            }
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while breaking it; try again"
        )))
    }

    /// Writes [`REVOKED`] into the holder's node at the version read, so a proclaim in
    /// between (which reads the data first, and refuses the mark) makes us read again.
    /// A ticket's node (a TTL node kept by `dlock renew`) is refused: its renewals
    /// write the data themselves; break it instead.
    pub(crate) async fn revoke_head(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.root, name);
        let client = self.sessions.first().session.get().await?;
        for _ in 0..5 {
            // behind a sync with the leader, as `inspect`: a lagging follower would
            // answer that nobody holds it
            let Some(children) = self.synced_queue(&client, &dir).await? else {
                return Ok(None);
            };
            let Some(head) = lowest(&children) else {
                return Ok(None);
            };
            let path = format!("{dir}/{head}");
            let read = client.get_data(&path);
            let (data, stat) = match self.op("read holder", async { Ok(read.await) }).await? {
                Ok(read) => read,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(from_zk("read holder", e)),
            };
            let holder = self.holder_info(&client, head, &data, &stat)?;
            if holder.owner.is_revoked() {
                return Ok(Some(holder));
            }
            if crate::ticket_node::HandedOver::read(&data, &stat).is_some() {
                return Err(LockError::unsupported_feature(
                    "zookeeper",
                    "revoking the holder of a ticket (its renewals rewrite its node): break it",
                ));
            }
            let written = client.set_data(&path, REVOKED, Some(stat.version));
            match self
                .op("revoke holder", async { Ok(written.await) })
                .await?
            {
                Ok(after) if after.czxid == stat.czxid => {
                    tracing::warn!(lock = %name, owner = %holder.owner, token = %holder.token, backend = "zookeeper", "holder revoked");
                    return Ok(Some(holder));
                }
                // the holder handed its lease over for a ticket in between, and the mark
                // landed on the ticket's new node (at the same version): that ticket's
                // renewals now fail, and it ends with its TTL
                Ok(_) => {
                    return Err(LockError::transient(format!(
                        "the holder of {name} handed its lease over for a ticket while being \
                         revoked; that ticket can no longer be renewed: break it to free {name} now"
                    )));
                }
                Err(zk::Error::BadVersion | zk::Error::NoNode) => {}
                Err(e) => return Err(from_zk("revoke holder", e)),
            }
        }
        Err(LockError::transient(format!(
            "the holder of {name} kept changing while revoking it; try again"
        )))
    }
}
