//! Redis Cluster under held locks: renewals that span slots, a lock's slot migrated to
//! another master while it is held (`MIGRATING`/`IMPORTING`, the keys moved, `ASK`
//! then `MOVED`), and a master failed over to its replica under a waiter. One test in
//! this binary, so nothing else moves slots.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

// The parts of this one test binary live in tests/cluster_slots/ (a crate root looks for
// `mod x;` beside itself, hence the `#[path]`s).
#[path = "cluster_slots/failover.rs"]
mod failover;
#[path = "cluster_slots/nodes.rs"]
mod nodes;
#[path = "cluster_slots/slots.rs"]
mod slots;

use failover::a_master_failed_over_under_a_waiter;
use slots::{
    a_slot_migrated_under_a_held_lock, awkward_names_keep_every_key_in_one_slot,
    renewals_spanning_slots_keep_every_lock,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_holds_across_slots_and_slot_migrations() {
    awkward_names_keep_every_key_in_one_slot().await;
    renewals_spanning_slots_keep_every_lock().await;
    a_slot_migrated_under_a_held_lock().await;
    a_master_failed_over_under_a_waiter().await;
}
