//! Model-checked protocols of dlock's adapters.
//!
//! Each model is a [`stateright::Model`]: the server's side written in Rust as the
//! server's source does it, the adapter's side through the adapter's own pure
//! decisions (`dlock_zk::decisions`, `dlock_redis::decisions`,
//! `dlock_etcd::decisions`, core's queue rule `standing`, …), and faults as actions
//! the checker may take at any step — crashes and pauses past a TTL, lost
//! replies and retries, delayed requests, leader changes, server clocks apart within
//! the documented bound, deletes decided and applied later. The checker explores every
//! interleaving to a bound; each property is a rule of the conformance suite. A
//! mutated decision (the defect a review once found) must make the checker report a
//! violation, with its trace: the tests keep both.
//!
//! `cargo test -p dlock-models` runs every model to its bound (about a minute on two
//! cores); `scripts/model --deep` to a depth that takes about an hour (docs/safety.md
//! has the table).
#![allow(clippy::missing_docs_in_private_items)]

pub mod check;
#[cfg(feature = "etcd")]
pub mod etcd_revoke;
pub mod queue_watch;
pub mod redis_grants;
pub mod redis_tokens;
pub mod redlock;
pub mod sql_claim;
pub mod zk_sessions;
pub mod zk_tickets;
