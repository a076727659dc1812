//! # dlock-redis
//!
//! [`DistributedLock`](dlock_core::DistributedLock) on Redis:
//! - [`RedisLock`] on one server: each operation is one Lua script (one round trip),
//!   the fencing token is a per-name hybrid clock that never expires
//!   (`max(counter + 1, server time in µs)`, so data loss cannot make it repeat), and a release publishes on a per-name channel
//!   that wakes one waiter — no polling.
//! - [`RedisLock`] behind Redis Sentinel (`redis-sentinel://s1,s2,s3/mastername`): the
//!   same, on the master the sentinels name, followed when they fail it over.
//! - [`RedisLock`] on a Redis Cluster (`redis-cluster://h1:6379,h2:6379`): each lock on
//!   its slot's master, renewals grouped per slot, wake-ups by sharded pub/sub.
//! - [`Redlock`] on N independent masters: quorum acquisition with per-node timeouts,
//!   undo on failure, and fencing tokens kept monotonic across quorums.
//!
//! Both use one multiplexed RESP3 connection per server, which carries commands and
//! release notifications alike and re-subscribes after a reconnect. Renewals that come
//! due together (guards renew on a shared grid) go out as one script call per server,
//! so holding many locks costs one round trip per renewal tick, not one per lock.
//!
//! ```no_run
//! use std::time::Duration;
//! use dlock_core::{DistributedLock, LockName};
//! use dlock_redis::RedisLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dlock_core::LockError> {
//! let locks = RedisLock::connect("redis://127.0.0.1:6379").await?;
//! let name = LockName::new("orders/42")?;
//! let lease = locks.acquire(&name, Duration::from_secs(10), Duration::from_secs(5)).await?;
//! println!("fencing token {}", lease.token());
//! locks.release(&lease).await?;
//! # Ok(()) }
//! ```
//!
//! Keys: `PREFIX{name}:lock`, `PREFIX{name}:fence` and the channel
//! `PREFIX{name}:released` share one hash tag (with `{`, `}` and `%` in the name
//! escaped), so a lock and its counter sit in one Redis Cluster slot. The prefix
//! defaults to `dlock:`; URL parameters `prefix`, `layout` and `timeout` are read by
//! dlock. With `layout=plain` ([`KeyLayout::Plain`]) the lock key is the prefix plus
//! the name, as the `SET NX` family of clients names it.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod cluster;
mod conn;
mod courtesy;
mod doctor;
mod errors;
mod fence;
mod inspect;
mod key_space;
mod keys;
mod lock;
mod node;
mod options;
mod proclaim;
mod queue;
mod quorum;
mod redlock;
mod renewals;
mod results;
mod scripts;
mod sentinel;
mod shared;
mod url;
mod waiting;
mod wakeups;

pub use builder::{Builder, RedisLockBuilder, RedlockBuilder};

/// The adapter's pure decisions, as its models in `dlock-models` call them: Redlock's
/// proposals (how far ahead of a clock, what to propose after a refusal, how far past
/// the nodes' clocks a node takes one) and when a proclaim is lost.
pub mod decisions {
    pub use crate::proclaim::{Proclaimed, proclaim_outcome};
    pub use crate::quorum::{AHEAD, MAX_AHEAD_MICROS, PROPOSALS, reproposal};
}
pub use fence::RedisFence;
pub use lock::RedisLock;
pub use options::{DEFAULT_COUNTER_RETENTION, DEFAULT_PREFIX, DEFAULT_RESTART_DELAY, KeyLayout};
pub use redlock::Redlock;
pub use results::RedisResults;
