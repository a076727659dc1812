//! Tickets on ZooKeeper: a lock node handed over becomes a ticket's node of the same
//! name, which outlives this client's session and lives as long as whoever holds the
//! ticket renews it (`ticket_node.rs`).
//!
//! An ephemeral node ends with its session, and a session cannot leave the process
//! that opened it (the client library keeps its password to itself). So a hand-over
//! swaps the ephemeral node for a persistent node with a TTL and its first renewal (a
//! child with the same TTL) in one transaction (delete + create + create at the same
//! path): the node keeps its place in the queue (its name and sequence number),
//! waiters watching it see a deletion, list the queue again and find it still ahead of
//! them. The lease keeps its token, written in the node's data, and gets the TTL the
//! acquisition asked for (a TTL node's is not clamped by the servers' session limits).
//! TTL nodes need `zookeeper.extendedTypesEnabled=true` on the servers, and expire by
//! the leader's wall clock: the servers' clocks must agree within a tenth of the TTL.

use std::sync::Arc;

use dlock_core::backend::{Backend, within};
use dlock_core::{FencingToken, Lease, LockError, Ticket};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::{NodeLease, TicketNode};
use crate::path::{lowest, owner_of, queue_dir};
use crate::ticket_node::{HandedOver, RENEWAL, no_ttl_nodes, whole_millis};

/// What reading back an unanswered swap found.
enum Settled {
    /// The ticket's node is in place.
    TakenOver,
    /// Our node is still ours, written so that the swap can no longer land.
    StillHeld,
    /// Neither: the lock is gone.
    Lost,
}

/// What a swap for a ticket's node came to.
enum Swapped {
    /// The ticket's node is in place.
    Done,
    /// Refused as a whole: the node changed or went, nothing was applied.
    Refused,
    /// No answer: a read must settle it.
    Unknown,
}

impl ZkLock {
    /// Replaces the node at `path`, if still at `version`, by a ticket's node carrying
    /// `moved` and its first renewal, in one transaction.
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
        let child = zk::CreateMode::PersistentSequential
            .with_acls(self.acls())
            .with_ttl(moved.ttl);
        let first = format!("{path}/{RENEWAL}");
        let mut swap = client.new_multi_writer();
        swap.add_delete(path, Some(version))
            .and_then(|()| swap.add_create(path, &moved.data(), &mode))
            .and_then(|()| swap.add_create(&first, b"", &child))
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

    /// [`Backend::hand_over`]: the lease's ephemeral node becomes a ticket's node of
    /// the same name, carrying the lease's token, with the TTL the acquisition asked
    /// for; the ticket has that TTL.
    pub(crate) async fn hand_over_node(&self, lease: &Lease) -> Result<Ticket, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        let ttl = if held.handed_over() {
            lease.ttl()
        } else {
            held.asked
        };
        let moved = HandedOver {
            ttl: whole_millis(ttl),
            token: lease.token(),
        };
        let ticket = Ticket::of(self.backend_name(), lease)?.with_ttl(moved.ttl);
        if held.handed_over() {
            return Ok(ticket); // a ticket's lease: its node already outlives us
        }
        let lost = || LockError::lease_lost(lease.name());
        if !lease.is_valid() {
            return Err(lost());
        }
        let client = held.slot.session.get().await?;
        let _writing = held.writes.lock().await;
        let ours = |s: &zk::Stat| -> Result<bool, LockError> {
            Ok(s.ephemeral_owner == client.session_id().0
                && FencingToken::from_signed(s.czxid, "czxid")? == lease.token())
        };
        // the data too: a revoked node (`crate::break_holder::REVOKED`) is not ours to
        // hand over
        let read = client.get_data(&held.path);
        let version = match self.op("read node", async { Ok(read.await) }).await? {
            Ok((data, s)) if ours(&s)? && data != crate::break_holder::REVOKED => s.version,
            Ok(_) | Err(zk::Error::NoNode) => return Err(lost()),
            Err(e) => return Err(crate::errors::from_zk("read node", e)),
        };
        match self.swap(&client, &held.path, version, moved).await? {
            Swapped::Done => return Ok(ticket),
            Swapped::Refused => return Err(lost()),
            Swapped::Unknown => {}
        }
        // An unanswered swap may have taken, or may still: it was sent on this session,
        // but a reconnection can leave it in flight on a server's way to the leader.
        // Read it back behind a sync with the leader; if our node is still there, write
        // it at the version the swap deletes, so a swap still in flight is refused.
        let settled = self.settle_swap(&client, lease, moved, &ours).await;
        match &settled {
            Ok(Settled::TakenOver) => return Ok(ticket),
            Ok(Settled::Lost) => return Err(lost()),
            Ok(Settled::StillHeld) => {
                return Err(LockError::transient(format!(
                    "the hand-over of {} went unanswered and did not take; this client \
                     still holds it",
                    lease.name()
                )));
            }
            Err(_) => {}
        }
        // Not settled: the swap may still land, with the ticket's TTL, which may be
        // shorter than what this lease is trusted for — so it is trusted no more here
        // (neither renewed nor released), and settled in the background: a node still
        // ours then is deleted (nobody holds it any more), a ticket's node nobody has the
        // ticket for ends with its TTL.
        lease.mark_handed_over();
        let (lock, client, lease) = (self.clone(), client.clone(), lease.clone());
        dlock_core::spawn_cleanup(async move {
            let session = client.session_id().0;
            let token = lease.token();
            let ours = |s: &zk::Stat| -> Result<bool, LockError> {
                Ok(s.ephemeral_owner == session
                    && FencingToken::from_signed(s.czxid, "czxid")? == token)
            };
            let mut pause = std::time::Duration::from_millis(100);
            loop {
                match lock.settle_swap(&client, &lease, moved, &ours).await {
                    Ok(Settled::StillHeld) => {
                        if let Some(held) = lease.backend_data::<NodeLease>() {
                            let _ = lock.delete_ticket_node(&client, &held.path, None).await;
                        }
                        return;
                    }
                    Ok(Settled::TakenOver | Settled::Lost) => return,
                    // the session ended: its node went with it
                    Err(_) if client.state().is_terminated() => return,
                    Err(_) => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(std::time::Duration::from_secs(5));
                    }
                }
            }
        });
        settled.map(|_| ticket)
    }

    /// Reads back a swap that went unanswered (see `hand_over_node`).
    async fn settle_swap(
        &self,
        client: &zk::Client,
        lease: &Lease,
        moved: HandedOver,
        ours: &impl Fn(&zk::Stat) -> Result<bool, LockError>,
    ) -> Result<Settled, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        for _ in 0..5 {
            let synced = client.sync(&held.path);
            let read = client.get_data(&held.path);
            let (synced, read) = self
                .op("read node", async { Ok(tokio::join!(synced, read)) })
                .await?;
            synced.map_err(|e| from_zk("sync with the leader", e))?;
            let (data, stat) = match read {
                Ok(read) => read,
                Err(zk::Error::NoNode) => return Ok(Settled::Lost),
                Err(e) => return Err(from_zk("read node", e)),
            };
            if HandedOver::read(&data, &stat) == Some(moved) {
                return Ok(Settled::TakenOver);
            }
            if !ours(&stat)? {
                return Ok(Settled::Lost);
            }
            let fence = client.set_data(&held.path, &data, Some(stat.version));
            match self.op("read node", async { Ok(fence.await) }).await? {
                Ok(_) => return Ok(Settled::StillHeld),
                // the swap (or a proclaim) got there first: read it again
                Err(zk::Error::BadVersion | zk::Error::NoNode) => {}
                Err(e) => return Err(from_zk("read node", e)),
            }
        }
        Err(LockError::transient(format!(
            "the hand-over of {}: its node kept changing",
            lease.name()
        )))
    }

    /// [`Backend::resume`]: the ticket's node, found by its owner id at the head of
    /// its queue, handed over and with the ticket's token, renewed once with the TTL
    /// it was handed over with (only the servers' clocks know what is left of it).
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
        if node.token != ticket.token() {
            return Err(LockError::lease_lost(ticket.name()));
        }
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
            asked: node.ttl,
            ticket: Some(TicketNode {
                czxid: stat.czxid,
                version: stat.version,
                ttl: node.ttl,
            }),
            writes: tokio::sync::Mutex::new(()),
        }));
        self.renew_handed_over(&lease).await
    }
}
