//! The lock recipe: ephemeral-sequential nodes, lowest sequence holds, each waiter
//! watches only its predecessor.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Capabilities, Deadline, DistributedLock, FencingToken, Lease, LeaseScope, LockError, LockInfo,
    LockName, OwnerId, validate_ttl,
};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::path::{lowest, node_prefix, owner_of, predecessor, queue_dir, sequence};
use crate::sessions::Slot;

/// What a ZooKeeper lease carries inside a [`Lease`]: the node, and the session it
/// lives on.
struct Held {
    path: String,
    slot: Arc<Slot>,
}

/// Deletes our node in the background unless the acquisition succeeded: found by the
/// owner id in its name, so this works even when the create's reply never arrived.
struct NodeCleanup {
    lock: ZkLock,
    slot: Arc<Slot>,
    dir: String,
    owner: String,
    armed: bool,
}

impl Drop for NodeCleanup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (lock, slot) = (self.lock.clone(), Arc::clone(&self.slot));
        let (dir, owner) = (self.dir.clone(), self.owner.clone());
        rt.spawn(async move {
            if let Err(e) = lock.delete_nodes_of(&slot, &dir, &owner).await {
                tracing::warn!(error = %e, "could not delete the node of an abandoned acquire; it goes with the session");
            }
        });
    }
}

/// Our place in a lock's queue.
struct Queued {
    name: String,
    czxid: i64,
    children: Vec<String>,
}

impl ZkLock {
    async fn op<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<T, LockError> {
        let limit = self.sessions.op_timeout();
        match tokio::time::timeout(limit, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_zk(what, e)),
            Err(_) => Err(LockError::Unavailable {
                message: format!("{what}: ZooKeeper did not answer within {limit:?}"),
                source: None,
            }),
        }
    }

    fn acls(&self) -> zk::Acls<'static> {
        if self.sessions.authenticated() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    async fn delete_nodes_of(&self, slot: &Slot, dir: &str, owner: &str) -> Result<(), LockError> {
        let client = slot.session.get().await?;
        let children = match client.list_children(dir).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(()),
            Err(e) => return Err(from_zk("list queue", e)),
        };
        let mine = node_prefix(owner);
        for c in children.iter().filter(|c| c.starts_with(&mine)) {
            match client.delete(&format!("{dir}/{c}"), None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(from_zk("delete abandoned node", e)),
            }
        }
        Ok(())
    }

    /// Creates our node and lists the queue, both sent at once (requests on a session
    /// are processed in order, so the listing includes our node): one round trip.
    async fn enqueue(
        &self,
        client: &zk::Client,
        dir: &str,
        owner: &str,
    ) -> Result<Queued, LockError> {
        let prefix = format!("{dir}/{}", node_prefix(owner));
        let acls = self.acls();
        for _ in 0..5 {
            let create = client.create(
                &prefix,
                b"",
                &zk::CreateMode::EphemeralSequential.with_acls(acls),
            );
            let list = client.list_children(dir);
            let limit = self.sessions.op_timeout();
            let (created, listed) =
                tokio::time::timeout(limit, async { tokio::join!(create, list) })
                    .await
                    .map_err(|_| LockError::Unavailable {
                        message: format!("acquire: ZooKeeper did not answer within {limit:?}"),
                        source: None,
                    })?;
            match created {
                Ok((stat, seq)) => {
                    return Ok(Queued {
                        name: format!("{}{seq}", node_prefix(owner)),
                        czxid: stat.czxid,
                        children: listed.map_err(|e| from_zk("list queue", e))?,
                    });
                }
                Err(zk::Error::NoNode) => {
                    // the queue node is missing (new name, or an empty container the
                    // server cleaned up): make it and try again
                    match client
                        .create(dir, b"", &zk::CreateMode::Container.with_acls(acls))
                        .await
                    {
                        Ok(_) | Err(zk::Error::NodeExists) => {}
                        Err(e) => return Err(from_zk("create queue node", e)),
                    }
                }
                Err(zk::Error::ConnectionLoss) => {
                    // the create may have happened: find our node by the owner id
                    let children = self.op("list queue", client.list_children(dir)).await?;
                    let mine = node_prefix(owner);
                    if let Some(name) = children.iter().find(|c| c.starts_with(&mine)).cloned() {
                        let stat = self
                            .op("read node", client.check_stat(&format!("{dir}/{name}")))
                            .await?;
                        if let Some(stat) = stat {
                            return Ok(Queued {
                                name,
                                czxid: stat.czxid,
                                children,
                            });
                        }
                    }
                }
                Err(e) => return Err(from_zk("create lock node", e)),
            }
        }
        Err(LockError::Unavailable {
            message: format!("could not create a lock node under {dir}"),
            source: None,
        })
    }

    #[allow(clippy::too_many_arguments)] // one call site per acquire path, all named
    fn lease(
        &self,
        client: &zk::Client,
        slot: &Arc<Slot>,
        name: &LockName,
        owner: OwnerId,
        czxid: i64,
        path: String,
        seen: Instant,
    ) -> Result<Lease, LockError> {
        Ok(Lease::new(
            name.clone(),
            owner,
            FencingToken::from_signed(czxid, "czxid")?,
            crate::session::lease_ttl(client.session_timeout()),
            seen,
        )
        .with_backend_data(Arc::new(Held {
            path,
            slot: Arc::clone(slot),
        })))
    }
}

/// What an acquisition starts with: its owner id, the queue node, the session for
/// its TTL, and the guard that deletes its node unless it is handed out.
type Prepared = (OwnerId, String, Arc<Slot>, zk::Client, NodeCleanup);

impl ZkLock {
    async fn prepare(&self, name: &LockName, ttl: Duration) -> Result<Prepared, LockError> {
        validate_ttl(ttl)?;
        let owner = OwnerId::random()?;
        let dir = queue_dir(&self.root, name);
        let slot = self.sessions.for_ttl(ttl).await?;
        let client = slot.session.get().await?;
        let cleanup = NodeCleanup {
            lock: self.clone(),
            slot: Arc::clone(&slot),
            dir: dir.clone(),
            owner: owner.to_string(),
            armed: true,
        };
        Ok((owner, dir, slot, client, cleanup))
    }

    /// One acquisition: join the queue, wait for our turn. A transient error ends it
    /// (its queue entry deleted by the drop guard); `acquire` tries again.
    async fn queue_and_wait(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        let deadline = Deadline::after(wait);
        let (owner, dir, slot, client, mut cleanup) = self.prepare(name, ttl).await?;
        let mut seen = Instant::now();
        let q = self.enqueue(&client, &dir, owner.as_str()).await?;
        let me = q.name;
        let path = format!("{dir}/{me}");
        let Some(my_seq) = sequence(&me) else {
            return Err(LockError::Backend {
                message: format!("lock node {me} has no sequence number"),
                source: None,
            });
        };
        let mut children = q.children;
        loop {
            if lowest(&children) == Some(&me) {
                let lease = self.lease(
                    &client,
                    &slot,
                    name,
                    owner.clone(),
                    q.czxid,
                    path.clone(),
                    seen,
                )?;
                if lease.is_valid() {
                    cleanup.armed = false;
                    return Ok(lease);
                }
            }
            if deadline.passed() {
                return Err(LockError::Timeout {
                    name: name.to_string(),
                    waited: deadline.waited(),
                });
            }
            if let Some(pred) = predecessor(&children, my_seq) {
                let (stat, watcher) = self
                    .op(
                        "watch predecessor",
                        client.check_and_watch_stat(&format!("{dir}/{pred}")),
                    )
                    .await?;
                if stat.is_some() {
                    tokio::select! {
                        _ = watcher.changed() => {}
                        () = tokio::time::sleep_until(deadline.end()) => {
                            return Err(LockError::Timeout { name: name.to_string(), waited: deadline.waited() });
                        }
                    }
                }
            }
            // The listing goes behind a sync with the leader (one round trip, both sent
            // at once): a server cut off from the leader cannot tell us we are first
            // after our session may already have expired there.
            let at = Instant::now();
            let synced = client.sync(&dir);
            let listed = client.list_children(&dir);
            let (synced, listed) = self
                .op("list queue", async { Ok(tokio::join!(synced, listed)) })
                .await?;
            synced.map_err(|e| from_zk("sync with the leader", e))?;
            children = listed.map_err(|e| from_zk("list queue", e))?;
            seen = at;
            if !children.contains(&me) {
                return Err(LockError::Unavailable {
                    message: format!(
                        "the session ended while waiting for {name}; its place in line is gone"
                    ),
                    source: None,
                });
            }
        }
    }
}

#[async_trait]
impl DistributedLock for ZkLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let (owner, dir, slot, client, mut cleanup) = self.prepare(name, ttl).await?;
        let sent = Instant::now();
        let q = self.enqueue(&client, &dir, owner.as_str()).await?;
        let path = format!("{dir}/{}", q.name);
        if lowest(&q.children) != Some(&q.name) {
            // someone holds or waits: leave the line at once
            match client.delete(&path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => cleanup.armed = false,
                Err(e) => {
                    tracing::debug!(error = %e, "delete after a failed try; cleaning up in the background")
                }
            }
            return Ok(None);
        }
        let lease = self.lease(&client, &slot, name, owner, q.czxid, path, sent)?;
        if !lease.is_valid() {
            // ours, but the answer came too late to trust: not "busy" (the node is
            // deleted in the background)
            return Err(LockError::Unavailable {
                message: format!("the grant of {name} arrived after its lease could have expired"),
                source: None,
            });
        }
        cleanup.armed = false;
        Ok(Some(lease))
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        dlock_core::retry_transient(name, wait, |left| self.queue_and_wait(name, ttl, left)).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Err(LockError::lease_lost(lease.name()));
        };
        // batched with the other renewals due now: one multi-read per tick
        // Through the session the node lives on if it is one of ours; another client's
        // lease is checked through our first session, which does not own the node, so
        // the answer is "lost" (this client cannot keep it alive).
        let slot = if self.sessions.owns(&held.slot) {
            &held.slot
        } else {
            self.sessions.first()
        };
        match slot.renewals.renew(&held.path).await? {
            // the node exists and belongs to our live session: the lease holds for
            // another session timeout from when the check was sent
            Some((timeout, sent)) => Ok(lease.renewed(timeout, sent)),
            None => Err(LockError::lease_lost(lease.name())),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Ok(false);
        };
        // any session of ours can delete the node (its path is unique to the
        // acquisition); the lease's own may belong to another client, or be gone
        let slot = if self.sessions.owns(&held.slot) {
            &held.slot
        } else {
            self.sessions.first()
        };
        let client = slot.session.get().await?;
        match self
            .op("release", async {
                Ok(client.delete(&held.path, None).await)
            })
            .await?
        {
            Ok(()) => Ok(true),
            Err(zk::Error::NoNode) => Ok(false),
            Err(e) => Err(from_zk("release", e)),
        }
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.root, name);
        let client = self.sessions.first().session.get().await?;
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
        let Some(stat) = self
            .op("read holder", client.check_stat(&format!("{dir}/{head}")))
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(LockInfo {
            owner: OwnerId::from_stored(owner_of(head).unwrap_or_default()),
            token: FencingToken::from_signed(stat.czxid, "czxid")?,
            remaining: client.session_timeout(),
        }))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, LeaseScope::PerSession, true).with_batched_renewals(true)
    }

    fn backend_name(&self) -> &'static str {
        "zookeeper"
    }
}
