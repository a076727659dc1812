//! # dlock-zk
//!
//! [`DistributedLock`](dlock_core::DistributedLock) on ZooKeeper, after Curator's lock
//! recipe:
//! - a contender creates an ephemeral-sequential node `ROOT/<name>/lock-<owner>-<seq>`
//!   (with `layout=curator`, `ROOT/<name>/_c_<owner>-lock-<seq>`, as Curator names
//!   its own: see [`NodeLayout`]) and lists the queue in the same round trip (requests
//!   on a session are processed in order); the lowest sequence holds the lock;
//! - the owner id in the node's name lets a client whose create reply was lost to a
//!   disconnect find its node again, and lets a dropped or timed-out `acquire` delete it
//!   (no ghost node blocks the line until the session ends);
//! - a waiter watches only its immediate predecessor (no herd); service is FIFO;
//! - the **fencing token** is the holder node's `czxid`: the zxid is global to the
//!   ensemble and only grows, and unlike a sequence number it survives the deletion of
//!   an empty queue node;
//! - leases are **per session** (`LeaseScope::PerSession`): a lock lives as long as the
//!   session it was taken on, and each TTL gets a session of its own whose timeout is
//!   that TTL (clamped by the server), so a crashed holder's lock is freed after the
//!   TTL asked for. Renew confirms, through the leader (a `sync` ahead of the read),
//!   that the session is alive and still owns the node; a confirmed renewal keeps the
//!   lease trusted for 3/5 of the session timeout, which is the TTL a lease reports
//!   (`Lease::ttl()`), because the leader's view of a session can lag its client by a
//!   ping. Renewals that come due together (guards renew on a shared grid) are
//!   checked in one `sync` + multi-read (ZooKeeper 3.6+), so holding many locks costs
//!   one round trip per renewal tick. A session that expired (partition, pause) loses
//!   its locks; the client then opens a new session;
//! - a lease **handed over** for a ticket (`DistributedLock::hand_over`, what `dlock
//!   acquire` prints) leaves its session: its node is swapped, in one transaction, for
//!   a persistent node with a TTL at the same path, which keeps its place in the queue
//!   and the lease's token, and lives as long as the ticket's taker renews it (a
//!   conditional write whose server timestamps show the node had not run out; its
//!   TTL stays the one it was handed over with). TTL
//!   nodes need `zookeeper.extendedTypesEnabled=true` on every server (without it a
//!   hand-over is refused as unsupported and the lock stays held), and the server
//!   deletes an expired one on its container manager's next look
//!   (`znode.container.checkIntervalMs`, a minute by default: set it lower, e.g. 1 s,
//!   so a crashed ticket holder's lock frees soon after its TTL).
//!
//! ```no_run
//! use std::time::Duration;
//! use dlock_core::{DistributedLock, LockName};
//! use dlock_zk::ZkLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = ZkLock::connect("127.0.0.1:2181,127.0.0.1:2182/myapp").await?;
//! let name = LockName::new("reindex")?;
//! let lease = locks.acquire(&name, Duration::from_secs(10), Duration::from_secs(60)).await?;
//! println!("fencing token {}", lease.token());
//! locks.release(&lease).await?;
//! # Ok(()) }
//! ```
//!
//! Names map to one path segment each: `%`, `/`, `.` and the code points ZooKeeper
//! refuses are percent-encoded, so no name can nest under another or escape the root.
//! With credentials ([`ZkLockBuilder::auth`]) nodes get the `creator_all` ACL, so other
//! ZooKeeper users cannot delete them.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod break_holder;
mod builder;
mod doctor;
mod errors;
mod guarded;
mod linger;
mod lock;
mod node_lease;
mod path;
mod proclaim;
mod queue;
mod queue_driver;
mod renewals;
mod session;
mod sessions;
mod shared;
mod ticket_node;
mod tickets;
mod url;

pub use builder::ZkLockBuilder;

/// The adapter's pure decisions, as its models in `dlock-models` call them: what a
/// renewal of a session's lock is trusted for, what a renewal of a ticket's node is
/// trusted for, and the server clock bound that rests on.
pub mod decisions {
    pub use crate::session::lease_ttl;
    pub use crate::ticket_node::{server_clock_bound, ticket_trusted_for};
}
pub use path::NodeLayout;
/// The ZooKeeper client library, for the operations of [`ZkLock::guarded_multi`].
pub use zookeeper_client;

use std::sync::Arc;

use dlock_core::LockError;

/// The default root node.
pub const DEFAULT_ROOT: &str = "/dlock";

/// A distributed lock on a ZooKeeper ensemble. Cheap to clone (clones share the
/// sessions).
#[derive(Clone)]
pub struct ZkLock {
    sessions: Arc<sessions::Sessions>,
    root: String,
    layout: NodeLayout,
}

impl std::fmt::Debug for ZkLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkLock")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ZkLock {
    /// Connects to `host:port[,host:port...][/chroot]`.
    ///
    /// # Errors
    /// See [`ZkLockBuilder::connect`].
    ///
    /// # Cancel safety
    /// Dropping it before it completes takes no lock: what it opened so far
    /// (connections, a session) closes with it; what it created (the lock table, a
    /// ZooKeeper root node) stays, and creating it again is harmless.
    pub async fn connect(addr: &str) -> Result<Self, LockError> {
        Self::builder(addr).connect().await
    }

    /// A builder for root, timeouts and credentials.
    #[must_use]
    pub fn builder(addr: &str) -> ZkLockBuilder {
        ZkLockBuilder::new(addr)
    }
}
