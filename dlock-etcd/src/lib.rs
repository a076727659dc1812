//! # dlock-etcd
//!
//! [`DistributedLock`](dlock_core::DistributedLock) on etcd v3, after etcd's own
//! `concurrency.Mutex`:
//! - every acquisition grants its own lease (so each lock expires on its own TTL) and
//!   puts `PREFIX<name>/<owner>` with that lease in **one txn** that also reads the head
//!   of the queue;
//! - the holder is the key with the smallest create revision, and that revision is the
//!   **fencing token** (etcd revisions only grow);
//! - a waiter watches only its **immediate predecessor** (no herd), opening the watch
//!   from now and then re-reading the key (a watch from a past revision waits for
//!   etcd's 100 ms catch-up loop), keeps its lease alive while it waits, and checks its
//!   key still exists before it returns (etcd#11456);
//! - waiters are served **FIFO**; a timed-out or dropped `acquire` revokes its lease,
//!   which deletes its queue key;
//! - renew is a lease keep-alive; release deletes the holder's key (only if it is
//!   still the one that acquisition created) and takes the lease back into a small
//!   pool for the next acquisition, so an uncontended acquire + release is one txn and
//!   one txn, as the raw protocol needs. A lease is handed out again only after it was
//!   taken back, and the client remembers which lock each lease backs, so a stale
//!   [`Lease`](dlock_core::Lease) can neither renew nor release its successor;
//! - a failing endpoint in a list is retried on the others within the timeout;
//! - the lease grant is kept off the acquire path: a pooled lease is handed out while
//!   at least two thirds of its TTL are left, and a fresh one is granted in the
//!   background before the pool runs dry.
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

mod client;
mod errors;
mod keys;
mod lock;
mod pool;

use std::sync::Arc;

pub use client::{DEFAULT_PREFIX, EtcdLockBuilder};

/// A distributed lock on an etcd v3 cluster. Cheap to clone.
#[derive(Clone)]
pub struct EtcdLock {
    client: etcd_client::Client,
    opts: Arc<client::Options>,
    pool: Arc<pool::LeasePool>,
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
    pub async fn connect(endpoints: &[&str]) -> Result<Self, dlock_core::LockError> {
        Self::builder(endpoints).connect().await
    }

    /// A builder for prefix, timeout and credentials.
    #[must_use]
    pub fn builder(endpoints: &[&str]) -> EtcdLockBuilder {
        EtcdLockBuilder::new(endpoints)
    }
}
