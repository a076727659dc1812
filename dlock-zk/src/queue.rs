//! A lock's queue in ZooKeeper: ephemeral-sequential nodes named after their owner,
//! the lowest sequence holds, each waiter watches only its predecessor.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::queue::Turn;
use dlock_core::backend::{Standing, within};
use dlock_core::{Access, LockError, LockName, OwnerId};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::path::{lowest, predecessor, queue_dir};
use crate::sessions::Slot;
use crate::shared::{shared_dir, shared_node_prefix, stand};

/// Deletes our node in the background unless the acquisition succeeded: found by the
/// owner id in its name (`prefix`), so this works even when the create's reply never
/// arrived.
pub(crate) struct NodeCleanup {
    lock: ZkLock,
    slot: Arc<Slot>,
    dir: String,
    /// Our node's name up to its sequence number (it carries the owner id).
    pub(crate) prefix: String,
    pub(crate) armed: bool,
}

impl Drop for NodeCleanup {
    fn drop(&mut self) {
        if self.armed {
            self.lock.delete_until_gone(
                Arc::clone(&self.slot),
                self.dir.clone(),
                self.prefix.clone(),
            );
        }
    }
}

impl ZkLock {
    /// Deletes our nodes under `dir` whose names start with `prefix` (an abandoned
    /// acquisition's, a release that failed), in a task of its own counted by
    /// [`dlock_core::settle`], retried until it succeeds or the session that made them
    /// has ended (they went with it). A node left behind would block every waiter behind
    /// it, and on a long-lived session that is for good.
    pub(crate) fn delete_until_gone(&self, slot: Arc<Slot>, dir: String, prefix: String) {
        let lock = self.clone();
        dlock_core::spawn_cleanup(async move {
            let made_by = slot.session.get().await.map(|c| c.session_id()).ok();
            let mut pause = Duration::from_millis(100);
            let mut told = false;
            loop {
                let err = match lock.delete_nodes_of(&slot, &dir, &prefix).await {
                    Ok(()) => return,
                    Err(e) => e,
                };
                let now = slot.session.get().await.map(|c| c.session_id()).ok();
                if made_by.is_some() && now.is_some() && now != made_by {
                    return; // a new session: the old one's nodes are gone
                }
                if !told {
                    tracing::warn!(node = %format!("{dir}/{prefix}"), error = %err, "could not delete a lock node; retrying until it is gone or its session ends");
                    told = true;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        });
    }
}

/// Our place in a lock's queue.
pub(crate) struct Queued {
    pub name: String,
    pub czxid: i64,
    pub children: Vec<String>,
}

impl ZkLock {
    async fn delete_nodes_of(&self, slot: &Slot, dir: &str, mine: &str) -> Result<(), LockError> {
        let client = slot.session.get().await?;
        let limit = self.sessions.op_timeout();
        let listed = within(limit, "list queue", async {
            Ok(client.list_children(dir).await)
        });
        let children = match listed.await? {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(()),
            Err(e) => return Err(from_zk("list queue", e)),
        };
        for c in children.iter().filter(|c| c.starts_with(mine)) {
            let path = format!("{dir}/{c}");
            let deleted = within(limit, "delete node", async {
                Ok(client.delete(&path, None).await)
            });
            match deleted.await? {
                Ok(()) | Err(zk::Error::NoNode) => {}
                // a hand-over that went unanswered took after all: our node is a
                // ticket's now, with its renewals
                Err(zk::Error::NotEmpty) => {
                    self.delete_ticket_node(&client, &path, None).await?;
                }
                Err(e) => return Err(from_zk("delete abandoned node", e)),
            }
        }
        Ok(())
    }

    /// Creates our node (`mine`: its name up to the sequence number) and lists the
    /// queue, both sent at once (requests on a session are processed in order, so the
    /// listing includes our node): one round trip.
    pub(crate) async fn enqueue_node(
        &self,
        client: &zk::Client,
        dir: &str,
        mine: &str,
    ) -> Result<Queued, LockError> {
        let prefix = format!("{dir}/{mine}");
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
                within(limit, "acquire", async { Ok(tokio::join!(create, list)) }).await?;
            match created {
                Ok((stat, seq)) => {
                    return Ok(Queued {
                        name: format!("{mine}{seq}"),
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
                        // the root is gone too: one Curator made is a container, which
                        // the server deletes with its last child
                        Err(zk::Error::NoNode) => {
                            let mode = zk::CreateMode::Persistent.with_acls(acls);
                            match client.mkdir(&self.root, &mode).await {
                                Ok(()) | Err(zk::Error::NodeExists) => {}
                                Err(e) => return Err(from_zk("create root node", e)),
                            }
                        }
                        Err(e) => return Err(from_zk("create queue node", e)),
                    }
                }
                Err(zk::Error::ConnectionLoss) => {
                    // the create may have happened: find our node by the owner id
                    let children = self.op("list queue", client.list_children(dir)).await?;
                    if let Some(name) = children.iter().find(|c| c.starts_with(mine)).cloned() {
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
        Err(LockError::transient(format!(
            "could not create a lock node under {dir}"
        )))
    }
}

/// What an acquisition starts with: the queue directory, the session for its TTL, and
/// the guard that deletes its node unless it is handed out.
type Prepared = (String, Arc<Slot>, zk::Client, NodeCleanup);

impl ZkLock {
    pub(crate) async fn prepare(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<Prepared, LockError> {
        let (dir, prefix) = if access == Access::Exclusive {
            (
                queue_dir(&self.root, name),
                self.layout.node_prefix(owner.as_str()),
            )
        } else {
            (
                shared_dir(&self.root, name, access),
                shared_node_prefix(access, owner.as_str()),
            )
        };
        let slot = self.sessions.for_ttl(ttl).await?;
        let client = slot.session.get().await?;
        let cleanup = NodeCleanup {
            lock: self.clone(),
            slot: Arc::clone(&slot),
            dir: dir.clone(),
            prefix,
            armed: true,
        };
        Ok((dir, slot, client, cleanup))
    }
}

/// One acquisition's node in a lock's queue; dropped before its grant, the node is
/// deleted (see `NodeCleanup`).
pub struct ZkEntry {
    pub(crate) name: LockName,
    pub(crate) access: Access,
    pub(crate) owner: OwnerId,
    pub(crate) dir: String,
    pub(crate) slot: Arc<Slot>,
    pub(crate) client: zk::Client,
    pub(crate) cleanup: NodeCleanup,
    /// Our node's name (`lock-<owner>-<sequence>`) and sequence number.
    pub(crate) node: String,
    pub(crate) seq: i32,
    pub(crate) czxid: i64,
    /// The TTL the acquisition asked for (a ticket's node gets it).
    pub(crate) ttl: Duration,
    /// The queue as last listed, and when that listing was sent.
    pub(crate) children: Vec<String>,
    pub(crate) seen: Instant,
}

impl std::fmt::Debug for ZkEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkEntry")
            .field("dir", &self.dir)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl ZkEntry {
    /// Where the entry stands in the queue as last listed.
    pub(crate) fn turn(&self) -> Result<Turn, LockError> {
        let holds = if self.access == Access::Exclusive {
            lowest(&self.children) == Some(&self.node)
        } else {
            stand(&self.name, self.access, &self.children, self.seq)?.0 == Standing::Holds
        };
        Ok(if holds { Turn::Head } else { Turn::Behind })
    }

    /// The nodes whose deletion may change where the entry stands.
    pub(crate) fn watch_set(&self) -> Result<Vec<String>, LockError> {
        if self.access == Access::Exclusive {
            return Ok(predecessor(&self.children, self.seq)
                .into_iter()
                .cloned()
                .collect());
        }
        Ok(stand(&self.name, self.access, &self.children, self.seq)?.1)
    }
}
