//! What a ZooKeeper lease carries inside a [`dlock_core::Lease`].

use std::sync::Arc;
use std::time::Duration;

use crate::sessions::Slot;

/// What a ZooKeeper lease carries inside a [`dlock_core::Lease`]: the node, and the session it
/// lives on.
pub(crate) struct NodeLease {
    pub(crate) path: String,
    pub(crate) slot: Arc<Slot>,
    /// The TTL the acquisition asked for: a ticket's node gets it (a session's timeout
    /// is clamped by the servers, a TTL node's is not).
    pub(crate) asked: Duration,
    /// A ticket's node (`ticket_node.rs`), not an ephemeral node of `slot`'s.
    pub(crate) ticket: Option<TicketNode>,
    /// Held by the writes that read the node's version first (a proclaim, a
    /// hand-over): a hand-over recreates the node at version 0, so one write's version
    /// could otherwise be another node's.
    pub(crate) writes: tokio::sync::Mutex<()>,
}

/// The ticket's node a lease was taken up on: which node (its creation zxid, as the
/// path alone cannot tell a node from one made later at the same path) at which version
/// (a break writes it, so renewals checked against it stop).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TicketNode {
    pub(crate) czxid: i64,
    pub(crate) version: i32,
    /// The TTL it was handed over with, which every renewal keeps: the node lives as
    /// long as its newest child, so the older children may go once a newer one exists.
    pub(crate) ttl: std::time::Duration,
}

impl NodeLease {
    /// Whether the lease lives in a ticket's node rather than a session's.
    pub(crate) fn handed_over(&self) -> bool {
        self.ticket.is_some()
    }
}
