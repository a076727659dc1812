//! Acquiring on ZooKeeper: the queue driver core's waiting loop runs.

use async_trait::async_trait;
use dlock_core::backend::queue::{QueueDriver, Turn};
use dlock_core::backend::{AttemptRequest, Standing};
use dlock_core::{Access, Lease, LockError, LockInfo, LockName};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::lock::sequence_of;
use crate::path::lowest;
use crate::queue::ZkEntry;
use crate::shared::stand;

/// Round trips: `try_acquire` one (the create and the listing sent back to back on one
/// session, then a delete only when busy); `acquire` the same, then per wait one watch
/// and one sync + listing (core's queue algorithm over this driver); `release` one
/// delete; a renewal one multi-read shared by every lock due on the same tick.
/// A waiter watches the node right before its own, then lists the queue behind a sync
/// with the leader.
#[async_trait]
impl QueueDriver for ZkLock {
    type Entry = ZkEntry;

    async fn try_take(&self, request: &AttemptRequest<'_>) -> Result<Option<Lease>, LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let (dir, slot, client, mut cleanup) = self.prepare(name, access, owner, ttl).await?;
        let sent = Instant::now();
        let q = self.enqueue_node(&client, &dir, &cleanup.prefix).await?;
        let path = format!("{dir}/{}", q.name);
        let holds = if access == Access::Exclusive {
            Ok(lowest(&q.children) == Some(&q.name))
        } else {
            let seq = sequence_of(&q.name)?;
            stand(name, access, &q.children, seq).map(|(here, _)| here == Standing::Holds)
        };
        if holds.as_ref().is_ok_and(|h| !h) || holds.is_err() {
            // someone holds or waits: leave the line at once
            match client.delete(&path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => cleanup.armed = false,
                Err(e) => {
                    tracing::debug!(error = %e, "delete after a failed try; cleaning up in the background")
                }
            }
            return holds.map(|_| None);
        }
        let lease = self
            .lease(
                &client,
                &slot,
                name,
                owner.clone(),
                q.czxid,
                path,
                (sent, ttl),
            )?
            .with_access(access);
        if !lease.is_valid() {
            // ours, but the answer came too late to trust: not "busy" (the node is
            // deleted in the background)
            return Err(LockError::transient(format!(
                "the grant of {name} arrived after its lease could have expired"
            )));
        }
        cleanup.armed = false;
        Ok(Some(lease))
    }

    async fn enqueue(&self, request: &AttemptRequest<'_>) -> Result<(ZkEntry, Turn), LockError> {
        let (name, access, owner, ttl) = (request.name, request.access, request.owner, request.ttl);
        let (dir, slot, client, cleanup) = self.prepare(name, access, owner, ttl).await?;
        let seen = Instant::now();
        let q = self.enqueue_node(&client, &dir, &cleanup.prefix).await?;
        let seq = sequence_of(&q.name)?;
        let entry = ZkEntry {
            name: name.clone(),
            access,
            owner: owner.clone(),
            dir,
            slot,
            client,
            cleanup,
            node: q.name,
            seq,
            czxid: q.czxid,
            ttl,
            children: q.children,
            seen,
        };
        let turn = match entry.turn() {
            Ok(t) => t,
            Err(e) => {
                // refused (another permit count): leave the queue before answering, so
                // the next caller does not meet this node
                let path = format!("{}/{}", entry.dir, entry.node);
                let mut entry = entry;
                if let Ok(Ok(()) | Err(zk::Error::NoNode)) = self
                    .op("leave queue", async {
                        Ok(entry.client.delete(&path, None).await)
                    })
                    .await
                {
                    entry.cleanup.armed = false;
                }
                return Err(e);
            }
        };
        Ok((entry, turn))
    }

    async fn next_turn(&self, e: &mut ZkEntry, until: Instant) -> Result<Turn, LockError> {
        // the predecessor (the mutex), or the nodes the queue rule names (shared)
        let watched = e.watch_set()?;
        if !self.wait_for_any_delete(e, &watched, until).await? {
            return Ok(Turn::Behind);
        }
        // The listing goes behind a sync with the leader (one round trip, both sent
        // at once): a server cut off from the leader cannot tell us we are first
        // after our session may already have expired there.
        let at = Instant::now();
        let synced = e.client.sync(&e.dir);
        let listed = e.client.list_children(&e.dir);
        let (synced, listed) = self
            .op("list queue", async { Ok(tokio::join!(synced, listed)) })
            .await?;
        synced.map_err(|err| from_zk("sync with the leader", err))?;
        e.children = listed.map_err(|err| from_zk("list queue", err))?;
        e.seen = at;
        if !e.children.contains(&e.node) {
            return Err(LockError::transient(format!(
                "the session ended while waiting for {}; its place in line is gone",
                e.name
            )));
        }
        e.turn()
    }

    async fn grant(&self, e: &mut ZkEntry, _waited: bool) -> Result<Option<Lease>, LockError> {
        // our node is in the listing `seen` was taken for (next_turn checks it)
        let lease = self
            .lease(
                &e.client,
                &e.slot,
                &e.name,
                e.owner.clone(),
                e.czxid,
                format!("{}/{}", e.dir, e.node),
                (e.seen, e.ttl),
            )?
            .with_access(e.access);
        if !lease.is_valid() {
            // the listing came back too late to trust: look again
            return Ok(None);
        }
        e.cleanup.armed = false;
        Ok(Some(lease))
    }

    async fn holder_gone(
        &self,
        name: &LockName,
        holder: &LockInfo,
        until: Instant,
    ) -> Result<(), LockError> {
        self.wait_holder_gone(name, holder, until).await
    }
}
