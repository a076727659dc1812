//! The lock recipe: ephemeral-sequential nodes, lowest sequence holds, each waiter
//! watches only its predecessor.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::backend::{Backend, Queues, within};
use dlock_core::{
    Access, Capabilities, FencingToken, Holding, Lease, LockError, LockInfo, LockName, OwnerId,
    Ticket,
};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;
use crate::path::{lowest, owner_of, queue_dir};
use crate::queue::ZkEntry;
use crate::sessions::Slot;

/// A renewal confirms, in one multi-read per tick, that the node still exists on a live
/// session (a handed-over node is written to instead, `tickets.rs`); a release deletes
/// the node; `inspect` lists the queue and reads its head.
/// Acquiring is the queue driver (`queue_driver.rs`).
#[async_trait]
impl Backend for ZkLock {
    type Family = Queues;

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        if held.handed_over() {
            return self.renew_handed_over(lease).await;
        }
        // batched with the other renewals due now: one multi-read per tick
        // Through the session the node lives on if it is one of ours; another client's
        // lease is checked through our first session, which does not own the node, so
        // the answer is "lost" (this client cannot keep it alive).
        let slot = if self.sessions.owns(&held.slot) {
            &held.slot
        } else {
            self.sessions.first()
        };
        match slot.renewals.submit(held.path.clone())?.answer().await? {
            // the node exists and belongs to our live session: the lease holds for
            // another session timeout from when the check was sent
            Some((timeout, sent)) => Ok(lease.renewed(timeout, sent)),
            None => Err(LockError::lease_lost(lease.name())),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = lease.backend_data::<NodeLease>() else {
            return Ok(false);
        };
        if let Some(node) = held.ticket {
            // the node taken up, with its renewals; one made since at the same path by
            // nobody (the path names the acquisition), so the creation zxid only guards
            let client = self.sessions.first().session.get().await?;
            return self
                .delete_ticket_node(&client, &held.path, Some(node.czxid))
                .await;
        }
        // any session of ours can delete the node (its path is unique to the
        // acquisition); the lease's own may belong to another client, or be gone
        let slot = if self.sessions.owns(&held.slot) {
            &held.slot
        } else {
            self.sessions.first()
        };
        let deleted = match slot.session.get().await {
            // the node's data read in the same round trip, just before the delete (a
            // session's requests apply in order): a node an operator revoked is deleted
            // too (we let go), but was no longer ours
            Ok(client) => match self
                .op("release", async {
                    let read = client.get_data(&held.path);
                    let delete = client.delete(&held.path, None);
                    let (read, deleted) = tokio::join!(read, delete);
                    let revoked = read.is_ok_and(|(d, _)| d == crate::break_holder::REVOKED);
                    Ok(deleted.map(|()| !revoked))
                })
                .await
            {
                Ok(Ok(ours)) => Ok(ours),
                Ok(Err(zk::Error::NoNode)) => Ok(false),
                // a hand-over that went unanswered took after all: the node at our path
                // (named for this acquisition) is its ticket's node, with its renewals
                Ok(Err(zk::Error::NotEmpty)) => {
                    self.delete_ticket_node(&client, &held.path, None).await
                }
                Ok(Err(e)) => Err(from_zk("release", e)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if deleted.is_err() {
            // the node lives as long as the session, which this client keeps alive:
            // it must not stay behind, so the delete goes on in the background
            if let Some((dir, node)) = held.path.rsplit_once('/') {
                self.delete_until_gone(Arc::clone(slot), dir.to_owned(), node.to_owned());
            }
        }
        deleted
    }

    async fn release_after(&self, lease: &Lease, linger: Duration) -> Result<bool, LockError> {
        self.release_lingering(lease, linger).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.root, name);
        let client = self.sessions.first().session.get().await?;
        let Some(children) = self.synced_queue(&client, &dir).await? else {
            return Ok(None);
        };
        let Some(head) = lowest(&children) else {
            return Ok(None);
        };
        self.read_holder(&client, &dir, head).await
    }

    async fn holders(&self, name: &LockName, of: Access) -> Result<Vec<Holding>, LockError> {
        self.shared_holders(name, of).await
    }

    async fn break_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.break_head(name).await
    }

    async fn revoke_holder(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        self.revoke_head(name).await
    }

    async fn hand_over(&self, lease: &Lease) -> Result<Ticket, LockError> {
        self.hand_over_node(lease).await
    }

    async fn resume(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        self.resume_node(ticket).await
    }

    async fn proclaim(
        &self,
        lease: &Lease,
        value: &dlock_core::HolderValue,
    ) -> Result<(), LockError> {
        self.proclaim_value(lease, value).await
    }

    async fn diagnose(&self) -> Result<Vec<dlock_core::Finding>, LockError> {
        let client = self.sessions.first().session.get().await?;
        let (hosts, asked) = self.sessions.asked();
        let mut found = crate::doctor::diagnose(hosts, asked, client.session_timeout()).await?;
        found.extend(self.ticket_findings(&client).await);
        Ok(found)
    }

    /// The root's children are the queues; each name's holder inspected, the rest of
    /// its queue its waiters.
    async fn list(&self, prefix: &str) -> Result<Vec<dlock_core::Held>, LockError> {
        let client = self.sessions.first().session.get().await?;
        let queues = match self
            .op("list locks", async {
                Ok(client.list_children(&self.root).await)
            })
            .await?
        {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(from_zk("list locks", e)),
        };
        let mut names: Vec<String> = queues
            .iter()
            .filter_map(|q| crate::path::name_of(q))
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        let mut held = Vec::new();
        for name in names {
            let Ok(name) = LockName::new(&name) else {
                continue;
            };
            let dir = queue_dir(&self.root, &name);
            let queued = match self
                .op("list queue", async { Ok(client.list_children(&dir).await) })
                .await?
            {
                Ok(c) => c.len(),
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(from_zk("list queue", e)),
            };
            if let Some(holder) = Backend::inspect(self, &name).await? {
                held.push(dlock_core::Held::new(
                    name,
                    holder,
                    Some(queued.saturating_sub(1)),
                ));
            }
        }
        held.extend(self.listed_shared(&queues, prefix).await?);
        held.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        Ok(held)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::per_session()
            .with_fair(true)
            .with_notify(true)
            .with_batched_renewals(true)
            .with_shared(true)
    }

    fn backend_name(&self) -> &'static str {
        "zookeeper"
    }
}

/// The sequence number of a node we just created (`lock-<owner>-<seq>` or
/// `<tag>-<owner>-<seq>`: neither part before it holds a `-`, and a wrapped sequence
/// keeps its sign).
pub(crate) fn sequence_of(node: &str) -> Result<i32, LockError> {
    node.split_once('-')
        .and_then(|(_, rest)| rest.split_once('-'))
        .and_then(|(_, seq)| seq.parse().ok())
        .ok_or_else(|| LockError::backend_msg(format!("lock node {node} has no sequence number")))
}

impl ZkLock {
    /// Waits until one of `nodes` in `e`'s queue is gone (or `until`: `false`). Every
    /// watch is set before any wait, so a deletion between two is seen by the check.
    pub(crate) async fn wait_for_any_delete(
        &self,
        e: &ZkEntry,
        nodes: &[String],
        until: Instant,
    ) -> Result<bool, LockError> {
        // each watch's event in a task of its own; dropping the set cancels the rest
        let mut watchers = tokio::task::JoinSet::new();
        for node in nodes {
            let path = format!("{}/{node}", e.dir);
            let (stat, watcher) = self
                .op("watch", e.client.check_and_watch_stat(&path))
                .await?;
            if stat.is_none() {
                return Ok(true);
            }
            watchers.spawn(watcher.changed());
        }
        if watchers.is_empty() {
            return Ok(true);
        }
        tokio::select! {
            _ = watchers.join_next() => Ok(true),
            () = tokio::time::sleep_until(until) => Ok(false),
        }
    }

    pub(crate) async fn op<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<T, LockError> {
        within(self.sessions.op_timeout(), what, async {
            f.await.map_err(|e| from_zk(what, e))
        })
        .await
    }

    pub(crate) fn acls(&self) -> zk::Acls<'static> {
        if self.sessions.authenticated() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    /// The holder whose node is `head` of the queue in `dir`; `None` once it is gone.
    pub(crate) async fn read_holder(
        &self,
        client: &zk::Client,
        dir: &str,
        head: &str,
    ) -> Result<Option<LockInfo>, LockError> {
        let read = client.get_data(&format!("{dir}/{head}"));
        let (data, stat) = match self.op("read holder", async { Ok(read.await) }).await? {
            Ok(read) => read,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(from_zk("read holder", e)),
        };
        self.holder_info(client, head, &data, &stat).map(Some)
    }

    /// The nodes of queue `dir` (`None`: no queue), listed behind a sync with the
    /// leader (sent at once, one round trip): a follower that has not yet applied
    /// another client's grant would report the lock free.
    pub(crate) async fn synced_queue(
        &self,
        client: &zk::Client,
        dir: &str,
    ) -> Result<Option<Vec<String>>, LockError> {
        let synced = client.sync(dir);
        let listed = client.list_children(dir);
        let (synced, listed) = self
            .op("list queue", async { Ok(tokio::join!(synced, listed)) })
            .await?;
        match (synced, listed) {
            (_, Err(zk::Error::NoNode)) | (Err(zk::Error::NoNode), _) => Ok(None),
            (Err(e), _) => Err(from_zk("sync with the leader", e)),
            (_, Err(e)) => Err(from_zk("list queue", e)),
            (Ok(()), Ok(c)) => Ok(Some(c)),
        }
    }

    /// The holder whose node `head` has `data` and `stat`: revoked (its owner id the
    /// revoked mark) when the data is [`crate::break_holder::REVOKED`].
    pub(crate) fn holder_info(
        &self,
        client: &zk::Client,
        head: &str,
        data: &[u8],
        stat: &zk::Stat,
    ) -> Result<LockInfo, LockError> {
        // a handed-over node lives its TTL past its last renewal, at most
        let handed_over = crate::ticket_node::HandedOver::read(data, stat);
        let owner = OwnerId::from_stored(owner_of(head).unwrap_or_default());
        Ok(LockInfo {
            owner: if data == crate::break_holder::REVOKED {
                owner.revoked()
            } else {
                owner
            },
            token: crate::ticket_node::token_of(data, stat)?,
            remaining: handed_over.map_or(client.session_timeout(), |h| h.ttl),
            proclaimed: dlock_core::HolderValue::from_proclaimed(data),
        })
    }

    /// The lease of the node at `path` (created at `czxid`) on `slot`'s session,
    /// granted to a request sent at `seen` that asked for `asked`.
    #[allow(clippy::too_many_arguments)] // one call site per acquire path, all named
    pub(crate) fn lease(
        &self,
        client: &zk::Client,
        slot: &Arc<Slot>,
        name: &LockName,
        owner: OwnerId,
        czxid: i64,
        path: String,
        (seen, asked): (Instant, Duration),
    ) -> Result<Lease, LockError> {
        Ok(Lease::new(
            name.clone(),
            owner,
            FencingToken::from_signed(czxid, "czxid")?,
            crate::session::lease_ttl(client.session_timeout()),
            seen,
        )
        .with_backend_data(Arc::new(NodeLease {
            path,
            slot: Arc::clone(slot),
            asked,
            ticket: None,
            writes: tokio::sync::Mutex::new(()),
        })))
    }
}
