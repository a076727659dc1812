//! # dlock-conformance
//!
//! The behaviour every dlock backend must show, as a library: each case is a
//! `pub async fn case(h: &impl Harness)` in [`cases`], and [`conformance_suite!`]
//! expands the whole list into `#[tokio::test]`s. An adapter's (or your own
//! backend's) `tests/conformance.rs` is a few lines:
//!
//! ```no_run
//! use std::sync::Arc;
//! use dlock_conformance::{Harness, Link, TestClient};
//! use dlock_core::MemoryLock;
//!
//! struct Memory(MemoryLock);
//!
//! #[dlock_core::async_trait]
//! impl Harness for Memory {
//!     async fn client(&self) -> TestClient {
//!         TestClient::new(Arc::new(self.0.clone()))
//!     }
//!     async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
//!         // network backends route this client through a FaultProxy instead
//!         dlock_conformance::switched_client(Arc::new(self.0.clone()))
//!     }
//! }
//!
//! async fn harness() -> Memory {
//!     Memory(MemoryLock::new())
//! }
//!
//! dlock_conformance::conformance_suite!(harness);
//! # fn main() {}
//! ```
//!
//! A backend slower than memory to notice an expired lease, or one whose shortest TTL
//! is longer, says so in [`Harness::timings`] (for example
//! `Timings::millis(1000, 1000, 20)` on etcd: 1 s leases noticed up to 1 s late).
//!
//! It also ships the [`FaultProxy`] (a TCP proxy that delays, blackholes or resets
//! traffic on demand) and the [`FencedCounter`] used by workloads.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![allow(clippy::expect_used)] // a failed expectation is how a conformance case reports

pub mod batching;
pub mod cases;
mod cut_off;
mod ensemble;
mod etcd_cluster;
mod fenced;
mod harness;
pub mod idempotency;
mod late;
mod mutex_only;
mod proxy;
mod sender_proxy;
mod servers;
pub mod steps;
mod switch;
mod tls_servers;
mod urls;
mod viewed;

pub use cut_off::cut_off_holder_is_lost_before_takeover;
pub use ensemble::{EnsembleOptions, PartitionableEnsemble, standalone_zk, stock_zk};
pub use etcd_cluster::{PartitionableEtcd, etcd_status};
pub use fenced::FencedCounter;
pub use harness::{Harness, Link, TestClient, Timings, required_env};
pub use late::late_grant_is_taken_again;
pub use proxy::{FaultMode, FaultProxy, REQUEST_BYTES};
pub use sender_proxy::SenderFilterProxy;
pub use servers::{ProxyGroup, TestCerts, TestServer, free_port, services_ctl};
pub use steps::{
    acquiring, acquiring_timed, assert_config_error, assert_later, assert_unreachable, guarded,
    holder_of, take, take_and_release, take_as, take_once_back, unique_name,
};
pub use switch::switched_client;
pub use urls::{url_host_port, url_with_host_port};
pub use viewed::Viewed;

#[doc(hidden)]
pub use dlock_core;

/// Expands the mutex cases once more for each exclusive side of a backend's shared
/// primitives — the write side of its read-write locks (`write_side::…`) and a
/// one-permit semaphore (`one_permit::…`) — through [`Viewed`]: each must behave as a
/// mutex. For backends that declare `Capabilities::shared`.
#[macro_export]
macro_rules! shared_as_mutex_suite {
    ($make:path) => {
        mod write_side {
            #[allow(unused_imports)]
            use super::*;
            $crate::shared_as_mutex_suite!(@cases $make, $crate::dlock_core::Access::Write;
                acquire_free_lock,
                mutual_exclusion,
                release_frees_lock,
                release_is_idempotent,
                renew_after_release_is_lost,
                inspect_reports_holder,
                invalid_arguments,
                renew_keeps_lease_past_ttl,
                unrenewed_lease_follows_scope,
                crashed_holder_expires,
                stale_lease_cannot_touch_new_holder,
                fencing_increases_across_releases,
                fencing_increases_across_expiry,
                acquire_waits_for_release,
                acquire_times_out,
                acquire_wakes_when_holder_crashes,
                cancelled_acquires_leak_nothing,
                waiters_are_served_fairly,
                a_release_wakes_one_waiter,
                a_busy_client_does_not_starve_a_waiter,
                counter_workload,
                awkward_names_are_distinct,
                acquire_rides_out_a_short_outage,
                min_hold_blocks_after_release,
                min_hold_outlives_a_crash
            );
        }
        mod one_permit {
            #[allow(unused_imports)]
            use super::*;
            $crate::shared_as_mutex_suite!(@cases $make, $crate::dlock_core::Access::Permit(1);
                mutual_exclusion,
                inspect_reports_holder,
                renew_keeps_lease_past_ttl,
                crashed_holder_expires,
                stale_lease_cannot_touch_new_holder,
                fencing_increases_across_expiry,
                acquire_waits_for_release,
                cancelled_acquires_leak_nothing,
                waiters_are_served_fairly,
                a_release_wakes_one_waiter,
                counter_workload,
                awkward_names_are_distinct,
                min_hold_blocks_after_release
            );
        }
    };
    (@cases $make:path, $access:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let harness = $crate::Viewed::new($make().await, $access);
                $crate::cases::$case(&harness).await;
            }
        )*
    };
}

/// Expands every conformance case into a `#[tokio::test]` that builds its harness with
/// `$make().await` (an `async fn() -> impl Harness`).
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@cases $make;
            acquire_free_lock,
            mutual_exclusion,
            release_frees_lock,
            release_is_idempotent,
            renew_after_release_is_lost,
            inspect_reports_holder,
            owner_ids_are_unique,
            invalid_arguments,
            independent_names,
            renew_keeps_lease_past_ttl,
            unrenewed_lease_follows_scope,
            crashed_holder_expires,
            stale_lease_cannot_touch_new_holder,
            fencing_increases_across_releases,
            fencing_increases_across_expiry,
            fencing_is_per_name_monotonic,
            acquire_waits_for_release,
            acquire_times_out,
            acquire_with_zero_wait,
            acquire_wakes_when_holder_crashes,
            cancelled_acquires_leak_nothing,
            waiters_are_served_fairly,
            a_release_wakes_one_waiter,
            a_busy_client_does_not_starve_a_waiter,
            counter_workload,
            awkward_names_are_distinct,
            unreachable_server_then_recovery,
            acquire_rides_out_a_short_outage,
            semaphore_admits_n,
            semaphore_count_is_part_of_the_contract,
            another_count_waits_for_an_idle_name,
            semaphore_never_more_than_n,
            semaphore_crashed_holder_frees_its_permit,
            semaphore_stale_permit_cannot_touch_another,
            semaphore_cancelled_waiters_leave_no_ghosts,
            semaphore_release_admits_one_waiter,
            readers_share_writers_exclude,
            rw_workload_never_mixes,
            writer_is_not_starved,
            second_waiting_writer_keeps_readers_out,
            rw_crashed_writer_expires,
            holder_value_is_readable,
            one_leader_at_a_time,
            observe_sees_the_next_leader,
            leadership_is_lost_before_the_next_leader_wins,
            campaign_refuses_bad_values,
            requeued_elections_survive_leader_kills,
            proclaimed_values_are_seen_without_a_new_epoch,
            multi_lock_never_deadlocks,
            min_hold_blocks_after_release,
            min_hold_outlives_a_crash,
            max_hold_ends_the_hold,
            try_with_lock_skips_when_busy,
            reentrant_scope_nests_and_excludes,
            fallback_serves_an_outage,
            fallback_companion_covers_the_wait,
            tickets_carry_a_lease_between_clients,
            a_handed_over_guard_leaves_the_ticket_its_lock,
            list_shows_held_locks,
            process_holder_is_readable,
            break_holder_hands_the_lock_on,
            revoke_holder_lets_nobody_in_while_it_holds
        );
    };
    (@cases $make:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let harness = $make().await;
                $crate::cases::$case(&harness).await;
            }
        )*
    };
}
