//! # dlock-etcd
//!
//! [`DistributedLock`](dlock_core::DistributedLock) on etcd v3, after etcd's own
//! `concurrency.Mutex`:
//! - the locks a client takes with one TTL hang on **one shared etcd lease**, as the
//!   mutexes of a Go `concurrency.Session` do, so holding N locks costs one keep-alive
//!   per renewal tick, not N. Each lock still **expires on its own TTL**: the client
//!   deletes the key of a lock that went a TTL without renewal, and if the client
//!   dies, hangs or is cut off, the shared lease expires on the server and takes every
//!   key with it (`LeaseScope::PerLease`);
//! - acquire puts `PREFIX<name>/<owner>` on that lease in **one txn**: taken at once if
//!   the queue is empty, else queued by a nested txn that also reads the head;
//! - the holder is the key with the smallest create revision, and that revision is the
//!   **fencing token** (etcd revisions only grow);
//! - a waiter watches only its **immediate predecessor** (no herd), opening the watch
//!   from now and then re-reading the key (a watch from a past revision waits for
//!   etcd's 100 ms catch-up loop), keeps its key alive while it waits, and checks its
//!   key still exists before it returns (etcd#11456);
//! - waiters are served **FIFO**; a timed-out or dropped `acquire` deletes its queue
//!   key at once, and again after the operation timeout in case a retried create lands
//!   late;
//! - renew refreshes the shared lease (one keep-alive, plus a read of the keys still
//!   attached to it, for every renewal due in the same tick) and moves the lock's own
//!   deadline; release deletes the key (it carries the acquisition's owner id, so the
//!   delete is owner-checked), one request. A stale [`Lease`](dlock_core::Lease) can
//!   neither renew nor release its successor; a lease is renewed through the client
//!   that acquired it;
//! - a failing endpoint in a list is retried on the others within the timeout;
//! - the lease grant is off the acquire path: the shared lease is used while at least
//!   two thirds of its TTL are left and refreshed in the background before that, so an
//!   uncontended acquire + release is one txn and one delete, as the raw protocol needs;
//! - `inspect` reports the holder's key and the shared lease's remaining time, an upper
//!   bound for a lock whose holder stopped renewing (its client deletes it sooner).
//!
//! ```no_run
//! use std::time::Duration;
//! use dlock_core::{DistributedLock, LockName};
//! use dlock_etcd::EtcdLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = EtcdLock::connect(&["http://127.0.0.1:2379"]).await?;
//! let name = LockName::new("deploy/prod")?;
//! let lease = locks.acquire(&name, Duration::from_secs(10), Duration::from_secs(60)).await?;
//! println!("fencing token {}", lease.token());
//! locks.release(&lease).await?;
//! # Ok(()) }
//! ```
//!
//! etcd leases have whole-second TTLs, and a server enforces a minimum of
//! 1.5 × its election timeout: `Lease::ttl()` reports the TTL actually granted.
//! `Lease::valid_until()` counts that TTL (less the drift margin) from the shared
//! lease's last refresh, not from the acquire: it can be up to a twelfth of the TTL
//! earlier than "acquired + ttl", and is the instant to trust.
//!
//! Every request carries etcd's `require_leader` flag, so a member cut off from its
//! peers refuses reads and cancels watches (the client retries on another member)
//! instead of answering from a copy that no longer moves; a waiter also re-reads its
//! predecessor at each refresh of its queued key, so a watch that went quiet delays a
//! hand-off by at most a third of the TTL.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod break_holder;
mod builder;
mod doctor;
mod errors;
mod guarded;
mod keys;
mod linger;
mod lock;
mod proclaim;
mod queue;
mod queue_driver;
mod reads;
mod rpc;
mod session;
mod shared;
mod tickets;
mod url;
mod watches;

use std::sync::Arc;

/// The adapter's pure decisions, as its model in `dlock-models` calls them: how long a
/// holder trusts its key past the last read that showed it on its lease, and the two
/// leases an operator's revoke moves the key behind.
pub mod decisions {
    pub use crate::break_holder::{revoke_guard, revoke_hold};
    pub use crate::session::bookkeeping::trusted_after_seen;
}

pub use builder::{DEFAULT_PREFIX, EtcdLockBuilder};
/// The etcd client library, for the operations of [`EtcdLock::guarded_txn`].
pub use etcd_client;

/// A distributed lock on an etcd v3 cluster. Cheap to clone.
#[derive(Clone)]
pub struct EtcdLock {
    client: etcd_client::Client,
    opts: Arc<builder::Options>,
    leases: Arc<session::bookkeeping::SharedLeases>,
    watches: Arc<watches::Watches>,
}

impl std::fmt::Debug for EtcdLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdLock")
            .field("prefix", &self.opts.prefix)
            .finish_non_exhaustive()
    }
}

impl EtcdLock {
    /// Connects to `endpoints` (`http://host:2379` or `host:2379`), members of one
    /// cluster.
    ///
    /// # Errors
    /// [`dlock_core::LockError::Unavailable`] when no endpoint answers.
    ///
    /// # Cancel safety
    /// Dropping it before it completes leaves nothing behind: what it opened so far
    /// (connections, a session) closes with it.
    pub async fn connect(endpoints: &[&str]) -> Result<Self, dlock_core::LockError> {
        Self::builder(endpoints).connect().await
    }

    /// A builder for prefix, timeout and credentials.
    #[must_use]
    pub fn builder(endpoints: &[&str]) -> EtcdLockBuilder {
        EtcdLockBuilder::new(endpoints)
    }
}
