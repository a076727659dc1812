//! What a ZooKeeper lease carries inside a [`dlock_core::Lease`].

use std::sync::Arc;

use crate::sessions::Slot;

/// What a ZooKeeper lease carries inside a [`dlock_core::Lease`]: the node, and the session it
/// lives on.
pub(crate) struct NodeLease {
    pub(crate) path: String,
    pub(crate) slot: Arc<Slot>,
    /// A TTL node a ticket carries (`tickets.rs`), not an ephemeral node of `slot`'s.
    pub(crate) handed_over: bool,
    /// Held by the writes that read the node's version first (a proclaim, a
    /// hand-over): a hand-over recreates the node at version 0, so one write's version
    /// could otherwise be another node's.
    pub(crate) writes: tokio::sync::Mutex<()>,
}
