//! Tickets on ZooKeeper: a lock node handed over becomes a TTL node of the same name,
//! which outlives this client's session and lives as long as whoever holds the ticket
//! renews it (`ticket_node.rs`).
//!
//! An ephemeral node ends with its session, and a session cannot leave the process
//! that opened it (the client library keeps its password to itself). So a hand-over
//! swaps the ephemeral node for a persistent node with a TTL in one transaction
//! (delete + create at the same path): the node keeps its place in the queue (its name
//! and sequence number), waiters watching it see a deletion, list the queue again and
//! find it still ahead of them. The lease keeps its token, written in the node's data.
//! TTL nodes need `zookeeper.extendedTypesEnabled=true` on the servers, and expire by
//! the leader's wall clock: the servers' clocks must agree within a tenth of the TTL.

use std::sync::Arc;

use dlock_core::backend::{Backend, within};
use dlock_core::{FencingToken, Lease, LockError, Ticket};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;
use crate::path::{lowest, owner_of, queue_dir};
use crate::ticket_node::{HandedOver, no_ttl_nodes};

/// What a swap for a TTL node came to.
enum Swapped {
    /// The TTL node is in place.
    Done,
    /// Refused as a whole: the node changed or went, nothing was applied.
    Refused,
    /// No answer: a read must settle it.
    Unknown,
}

impl ZkLock {
    /// Replaces the node at `path`, if still at `version`, by a TTL node carrying
    /// `moved`, in one transaction.
    async fn swap(
        &self,
        client: &zk::Client,
        path: &str,
        version: i32,
        moved: HandedOver,
    ) -> Result<Swapped, LockError> {
        let mode = zk::CreateMode::Persistent
            .with_acls(self.acls())
            .with_ttl(moved.ttl);
        let mut swap = client.new_multi_writer();
        swap.add_delete(path, Some(version))
            .and_then(|()| swap.add_create(path, &moved.data(), &mode))
            .map_err(|e| LockError::InvalidArgument(format!("a TTL node: {e}")))?;
        let limit = self.sessions.op_timeout();
        Ok(
            match within(limit, "hand over", async { Ok(swap.commit().await) }).await {
                Ok(Ok(_)) => Swapped::Done,
                Ok(Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::Unimplemented,
                    ..
                })) => return Err(no_ttl_nodes()),
                Ok(Err(zk::MultiWriteError::OperationFailed {
                    index: 0,
                    source: zk::Error::BadVersion | zk::Error::NoNode,
                })) => Swapped::Refused,
                Ok(Err(zk::MultiWriteError::OperationFailed { source, .. })) => {
                    return Err(from_zk("hand over", source));
                }
                Ok(Err(zk::MultiWriteError::RequestFailed { .. })) | Err(_) => Swapped::Unknown,
            },
        )
    }

    /// [`Backend::hand_over`]: the lease's ephemeral node becomes a TTL node of the
    /// same name, carrying the lease's token; the ticket has the node's TTL.
    pub(crate) async fn hand_over_node(&self, lease: &Lease) -> Result<Ticket, LockError> {
        let moved = HandedOver::of(lease);
        let ticket = Ticket::of(self.backend_name(), lease)?.with_ttl(moved.ttl);
        let held = lease.renewable_data::<NodeLease>()?;
        if held.handed_over {
            return Ok(ticket); // a ticket's lease: its node already outlives us
        }
        let lost = || LockError::lease_lost(lease.name());
        if !lease.is_valid() {
            return Err(lost());
        }
        let client = held.slot.session.get().await?;
        let _writing = held.writes.lock().await;
        let stat = self.op("read node", client.check_stat(&held.path)).await?;
        let version = match stat {
            Some(s)
                if s.ephemeral_owner == client.session_id().0
                    && FencingToken::from_signed(s.czxid, "czxid")? == lease.token() =>
            {
                s.version
            }
            _ => return Err(lost()),
        };
        if let Swapped::Refused = self.swap(&client, &held.path, version, moved).await? {
            return Err(lost());
        }
        // read back, behind a sync with the leader: an unanswered swap may have taken
        let synced = client.sync(&held.path);
        let read = client.get_data(&held.path);
        let (synced, read) = self
            .op("read node", async { Ok(tokio::join!(synced, read)) })
            .await?;
        synced.map_err(|e| from_zk("sync with the leader", e))?;
        match read {
            Ok((data, s)) if HandedOver::read(&data, &s) == Some(moved) => Ok(ticket),
            Ok((_, s)) if s.ephemeral_owner == client.session_id().0 => {
                Err(LockError::transient(format!(
                    "the hand-over of {} went unanswered and did not take; this client still holds it",
                    lease.name()
                )))
            }
            Ok(_) | Err(zk::Error::NoNode) => Err(lost()),
            Err(e) => Err(from_zk("read node", e)),
        }
    }

    /// [`Backend::resume`]: the ticket's node, found by its owner id at the head of
    /// its queue, handed over and with the ticket's token, renewed once with the TTL
    /// it has (only the servers' clocks know what is left of it).
    pub(crate) async fn resume_node(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        if ticket.backend() != self.backend_name() {
            return Err(ticket.foreign(self.backend_name()));
        }
        let slot = Arc::clone(self.sessions.first());
        let client = slot.session.get().await?;
        let dir = queue_dir(&self.root, ticket.name());
        let children = match self
            .op("list queue", async { Ok(client.list_children(&dir).await) })
            .await?
        {
            Ok(c) => c,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(from_zk("list queue", e)),
        };
        // by owner id in either node layout: a Curator-layout client's ticket too
        let owner = ticket.owner().as_str();
        let Some(node) =
            lowest(&children).filter(|h| !owner.is_empty() && owner_of(h) == Some(owner))
        else {
            // not held: refused as unsupported instead where no ticket could ever be
            // (`dlock acquire` asks first, so it takes nothing on such servers)
            self.check_ttl_nodes(&client).await?;
            return Err(LockError::lease_lost(ticket.name()));
        };
        let path = format!("{dir}/{node}");
        let read = client.get_data(&path);
        let (data, stat) = match self.op("read node", async { Ok(read.await) }).await? {
            Ok(read) => read,
            Err(zk::Error::NoNode) => return Err(LockError::lease_lost(ticket.name())),
            Err(e) => return Err(from_zk("read node", e)),
        };
        let Some(node) = HandedOver::read(&data, &stat) else {
            if stat.ephemeral_owner != 0
                && FencingToken::from_signed(stat.czxid, "czxid")? == ticket.token()
            {
                return Err(LockError::InvalidArgument(format!(
                    "the ZooKeeper lock on {} was not handed over: write its ticket with \
                     DistributedLock::hand_over (dlock acquire does)",
                    ticket.name()
                )));
            }
            return Err(LockError::lease_lost(ticket.name()));
        };
        let lease = Lease::new(
            ticket.name().clone(),
            ticket.owner().clone(),
            ticket.token(),
            node.ttl,
            Instant::now(),
        )
        .with_backend_data(Arc::new(NodeLease {
            path,
            slot,
            handed_over: true,
            writes: tokio::sync::Mutex::new(()),
        }));
        self.renew_handed_over(&lease, true).await
    }
}
