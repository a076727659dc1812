//! A release that keeps the name blocked a while (lock-delay), and waiting for a
//! holder to go (leader observers).

use std::time::Duration;

use dlock_core::{Lease, LockError, LockInfo, LockName};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::path::{lowest, owner_of, queue_dir};

impl ZkLock {
    /// An ephemeral node lives exactly as long as its session, so there is no TTL to
    /// cut: the node is kept for `linger` and deleted then, by a task of its own — a
    /// caller that stops waiting for the release (a timeout, a `select!`) still gets
    /// its node deleted on time, never kept for the session's life. Should this
    /// process die meanwhile, the session's timeout (the lease's TTL, which a
    /// lock-delay never exceeds) keeps the name blocked instead; should it shut its
    /// runtime down cleanly meanwhile, the session closes and the name frees early —
    /// so `dlock run` waits for the release before it exits.
    pub(crate) async fn release_lingering(
        &self,
        lease: &Lease,
        linger: Duration,
    ) -> Result<bool, LockError> {
        // a lease already lost has nothing to keep blocked: no sleep for a node gone,
        // and one whose lease ran out by our clock is deleted at once
        let Some(held) = lease.backend_data::<crate::node_lease::NodeLease>() else {
            return Ok(false);
        };
        let client = self.sessions.first().session.get().await?;
        let stat = self.op("read node", client.check_stat(&held.path)).await?;
        if stat.is_none() {
            return Ok(false);
        }
        if !lease.is_valid() {
            return dlock_core::backend::Backend::release(self, lease).await;
        }
        if held.handed_over() {
            // a TTL node lives its TTL (never shorter than the linger) past a renewal:
            // should this process die while it lingers, the name stays blocked anyway
            match self.renew_handed_over(lease).await {
                Ok(_) => {}
                Err(LockError::LeaseLost { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let (lock, lease) = (self.clone(), lease.clone());
        let delete = tokio::spawn(async move {
            tokio::time::sleep(linger).await;
            dlock_core::backend::Backend::release(&lock, &lease).await
        });
        delete
            .await
            .map_err(|e| LockError::backend_msg(format!("lingering release failed: {e}")))?
    }

    /// Waits until `holder`'s node in `name`'s queue is deleted (released, or its
    /// session expired), or `until`: one data watch on that node (a handed-over node's
    /// renewals wake it too; the caller looks again).
    pub(crate) async fn wait_holder_gone(
        &self,
        name: &LockName,
        holder: &LockInfo,
        until: Instant,
    ) -> Result<(), LockError> {
        let dir = queue_dir(&self.root, name);
        let client = self.sessions.first().session.get().await?;
        let children = match self
            .op("list queue", async { Ok(client.list_children(&dir).await) })
            .await?
        {
            Ok(c) => c,
            Err(_) => return Ok(()),
        };
        // by owner; a node that names none (Curator's unprotected `lock-<seq>`) is the
        // holder's if it heads the queue — either way its token must match
        let owner = holder.owner.as_str();
        let Some(node) = children
            .iter()
            .find(|c| !owner.is_empty() && owner_of(c) == Some(owner))
            .or_else(|| lowest(&children))
        else {
            return Ok(());
        };
        let path = format!("{dir}/{node}");
        let (data, stat, watcher) = match self
            .op("watch holder", async {
                Ok(client.get_and_watch_data(&path).await)
            })
            .await?
        {
            Ok(read) => read,
            Err(zk::Error::NoNode) => return Ok(()),
            Err(e) => return Err(crate::errors::from_zk("watch holder", e)),
        };
        // another holder, or a value proclaimed since: the caller looks again
        if crate::ticket_node::token_of(&data, &stat)? != holder.token
            || dlock_core::HolderValue::from_proclaimed(&data) != holder.proclaimed
        {
            return Ok(());
        }
        tokio::select! {
            _ = watcher.changed() => {}
            () = tokio::time::sleep_until(until) => {}
        }
        Ok(())
    }
}
