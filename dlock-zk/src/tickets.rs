//! Tickets on ZooKeeper: a lock node handed over becomes a TTL node of the same name,
//! which outlives this client's session and lives as long as whoever holds the ticket
//! keeps writing to it.
//!
//! An ephemeral node ends with its session, and a session cannot leave the process
//! that opened it (the client library keeps its password to itself). So a hand-over
//! swaps the ephemeral node for a persistent node with a TTL in one transaction
//! (delete + create at the same path): the node keeps its place in the queue (its name
//! and sequence number), waiters watching it see a deletion, list the queue again and
//! find it still ahead of them. The lease keeps its token (see [`HandedOver`]).
//!
//! The server deletes a TTL node once its wall clock says the node went unmodified
//! for the TTL (its container manager looks every `znode.container.checkIntervalMs`,
//! 60 s by default), and that delete does not look at the node's modification time
//! again. A renewal therefore writes with the version it read and checks the gap
//! between the two modification times the server stamped: at most the TTL, and no
//! delete can have been decided on the old one before the write (the manager decides
//! at a wall-clock time after the old stamp plus the TTL, and before the new stamp);
//! more, and the node is deleted by us and the lease is lost. A renewal with another
//! TTL swaps the node again, under the same check. This holds while the
//! servers' wall clocks agree within the lease's drift margin, as Redis's key expiry
//! does. TTL nodes need `zookeeper.extendedTypesEnabled=true` on the servers.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::backend::{Backend, within};
use dlock_core::{FencingToken, Lease, LockError, Ticket};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::lock::NodeLease;
use crate::path::{lowest, queue_dir};

/// What a handed-over node's data starts with; its TTL in milliseconds and the token
/// of the lease it carries follow. ZooKeeper shows clients a TTL node as a plain
/// persistent one (its `ephemeralOwner` reads 0), so the data is how `resume` and
/// renewals know the node; and the node's own creation zxid is the swap's — above those
/// of the waiters queued behind it — so the lease keeps the token it was granted with,
/// written here, and a waiter granted after it still gets a higher one.
const HANDED_OVER: &str = "dlock:handed-over";

/// A handed-over node as its data describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HandedOver {
    ttl: Duration,
    token: FencingToken,
}

impl HandedOver {
    fn data(self) -> Vec<u8> {
        format!(
            "{HANDED_OVER} ttl_ms={} token={}",
            self.ttl.as_millis(),
            self.token
        )
        .into_bytes()
    }

    /// The node of `data` and `stat`, if it was handed over (never an ephemeral node).
    fn read(data: &[u8], stat: &zk::Stat) -> Option<Self> {
        let text = std::str::from_utf8(data).ok()?.strip_prefix(HANDED_OVER)?;
        let (ttl, token) = text.strip_prefix(" ttl_ms=")?.split_once(" token=")?;
        let ttl = Duration::from_millis(ttl.parse().ok().filter(|ms| *ms > 0)?);
        let token = FencingToken::new(token.parse().ok()?);
        (stat.ephemeral_owner == 0).then_some(Self { ttl, token })
    }
}

/// The fencing token of the lease a lock node stands for: its creation zxid, or the
/// one written in a handed-over node.
pub(crate) fn token_of(data: &[u8], stat: &zk::Stat) -> Result<FencingToken, LockError> {
    match HandedOver::read(data, stat) {
        Some(h) => Ok(h.token),
        None => FencingToken::from_signed(stat.czxid, "czxid"),
    }
}

/// The error for servers without TTL nodes.
fn no_ttl_nodes() -> LockError {
    LockError::Unsupported {
        backend: "zookeeper",
        what: "tickets on these servers: a ticket's lock lives in a TTL node, which needs \
               zookeeper.extendedTypesEnabled=true (a JVM flag or zoo.cfg line on every server)"
            .into(),
    }
}

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
            match within(limit, "swap node", async { Ok(swap.commit().await) }).await {
                Ok(Ok(_)) => Swapped::Done,
                Ok(Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::Unimplemented,
                    ..
                })) => return Err(no_ttl_nodes()),
                Ok(Err(zk::MultiWriteError::OperationFailed { index: 0, .. })) => Swapped::Refused,
                Ok(Err(zk::MultiWriteError::OperationFailed { source, .. })) => {
                    return Err(from_zk("swap node", source));
                }
                Ok(Err(zk::MultiWriteError::RequestFailed { .. })) | Err(_) => Swapped::Unknown,
            },
        )
    }

    /// The node at `path` as a handed-over node: `None` when it is gone or is not one.
    async fn read_handed_over(
        &self,
        client: &zk::Client,
        path: &str,
    ) -> Result<Option<(Vec<u8>, zk::Stat, HandedOver)>, LockError> {
        match self
            .op("read node", async { Ok(client.get_data(path).await) })
            .await?
        {
            Ok((data, stat)) => Ok(HandedOver::read(&data, &stat).map(|h| (data, stat, h))),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(from_zk("read node", e)),
        }
    }

    /// [`Backend::hand_over`]: the lease's ephemeral node becomes a TTL node of the
    /// same name, carrying the lease's token.
    pub(crate) async fn hand_over_node(&self, lease: &Lease) -> Result<Ticket, LockError> {
        let ticket = Ticket::of(self.backend_name(), lease)?;
        let held = lease.renewable_data::<NodeLease>()?;
        if held.handed_over {
            return Ok(ticket); // a ticket's lease: its node already outlives us
        }
        let lost = || LockError::lease_lost(lease.name());
        if !lease.is_valid() {
            return Err(lost());
        }
        let client = held.slot.session.get().await?;
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
        let moved = HandedOver {
            ttl: lease.ttl(),
            token: lease.token(),
        };
        if let Swapped::Refused = self.swap(&client, &held.path, version, moved).await? {
            return Err(lost());
        }
        // read back: an unanswered swap may or may not have taken
        match self.read_handed_over(&client, &held.path).await {
            Ok(Some((_, _, h))) if h == moved => Ok(ticket),
            Ok(Some(_)) => Err(lost()),
            Ok(None) => match self.op("read node", client.check_stat(&held.path)).await? {
                Some(_) => Err(LockError::transient(format!(
                    "the hand-over of {} went unanswered and did not take; this client still holds it",
                    lease.name()
                ))),
                None => Err(lost()),
            },
            Err(e) => Err(e),
        }
    }

    /// [`Backend::resume`]: the ticket's node, found by its owner id at the head of
    /// its queue, handed over and with the ticket's token, renewed once with the TTL
    /// it has (only the servers' clocks know what is left of it).
    pub(crate) async fn resume_node(&self, ticket: &Ticket) -> Result<Lease, LockError> {
        if ticket.backend() != self.backend_name() {
            return Err(ticket.foreign(self.backend_name()));
        }
        let lost = || LockError::lease_lost(ticket.name());
        let slot = Arc::clone(self.sessions.first());
        let client = slot.session.get().await?;
        let dir = queue_dir(&self.root, ticket.name());
        let children = match self
            .op("list queue", async { Ok(client.list_children(&dir).await) })
            .await?
        {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Err(lost()),
            Err(e) => return Err(from_zk("list queue", e)),
        };
        let prefix = self.layout.node_prefix(ticket.owner().as_str());
        let node = match lowest(&children) {
            Some(head) if !ticket.owner().as_str().is_empty() && head.starts_with(&prefix) => head,
            _ => return Err(lost()),
        };
        let path = format!("{dir}/{node}");
        match self
            .op("read node", async { Ok(client.get_data(&path).await) })
            .await?
        {
            Ok((data, stat)) if HandedOver::read(&data, &stat).is_none() => {
                if stat.ephemeral_owner != 0
                    && FencingToken::from_signed(stat.czxid, "czxid")? == ticket.token()
                {
                    return Err(LockError::InvalidArgument(format!(
                        "the ZooKeeper lock on {} was not handed over: write its ticket with \
                         DistributedLock::hand_over (dlock acquire does)",
                        ticket.name()
                    )));
                }
                return Err(lost());
            }
            Ok(_) => {}
            Err(zk::Error::NoNode) => return Err(lost()),
            Err(e) => return Err(from_zk("read node", e)),
        }
        let lease = Lease::new(
            ticket.name().clone(),
            ticket.owner().clone(),
            ticket.token(),
            ticket.ttl(),
            Instant::now(),
        )
        .with_backend_data(Arc::new(NodeLease {
            path,
            slot,
            handed_over: true,
        }));
        self.write_handed_over(&lease, None).await
    }

    /// [`Backend::renew`] of a handed-over node, with the lease's TTL.
    pub(crate) async fn renew_handed_over(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.write_handed_over(lease, Some(lease.ttl())).await
    }

    /// A renewal of a handed-over node (with `ttl`, or the TTL it has): read it, write
    /// it back with the version read — its data, or a swap for a node with the new
    /// TTL — and check the servers' stamps (see the module docs).
    async fn write_handed_over(
        &self,
        lease: &Lease,
        ttl: Option<Duration>,
    ) -> Result<Lease, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        let lost = || LockError::lease_lost(lease.name());
        let client = held.slot.session.get().await?;
        // another process renewing the same ticket may write between our read and
        // write: read again then
        for _ in 0..5 {
            let Some((data, before, now)) = self.read_handed_over(&client, &held.path).await?
            else {
                return Err(lost());
            };
            if now.token != lease.token() {
                return Err(lost());
            }
            let ttl = ttl.unwrap_or(now.ttl);
            let sent = Instant::now();
            let after = if ttl == now.ttl {
                let written = client.set_data(&held.path, &data, Some(before.version));
                match self.op("renew", async { Ok(written.await) }).await? {
                    Ok(after) => after,
                    Err(zk::Error::BadVersion) => continue,
                    Err(zk::Error::NoNode) => return Err(lost()),
                    Err(e) => return Err(from_zk("renew", e)),
                }
            } else {
                let moved = HandedOver { ttl, ..now };
                if let Swapped::Refused = self
                    .swap(&client, &held.path, before.version, moved)
                    .await?
                {
                    continue;
                }
                match self.read_handed_over(&client, &held.path).await? {
                    Some((_, after, h)) if h == moved => after,
                    Some(_) => continue,
                    None => return Err(lost()),
                }
            };
            // the old node's TTL decides whether its delete could be under way
            let gap = u128::try_from(after.mtime.saturating_sub(before.mtime)).unwrap_or(0);
            if gap > now.ttl.as_millis() {
                // by the servers' clocks the node had run out before this write, and
                // its delete may already be decided: it is not ours to keep
                let _ = client.delete(&held.path, Some(after.version)).await;
                return Err(lost());
            }
            return Ok(lease.renewed(ttl, sent));
        }
        Err(LockError::transient(format!(
            "renewing {}: its node kept changing under other writers",
            lease.name()
        )))
    }
}
