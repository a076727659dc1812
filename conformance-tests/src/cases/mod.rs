//! The conformance cases, each a `pub async fn(&impl Harness)`: the specification of
//! [`DistributedLock`]'s rules, case by case.
//!
//! | rule (see the trait) | cases |
//! |---|---|
//! | 1. at most one unexpired lease per name | `acquire_free_lock`, `mutual_exclusion`, `independent_names`, `awkward_names_are_distinct`, `counter_workload` |
//! | 2. release and renew check the owner | `release_frees_lock`, `release_is_idempotent`, `renew_after_release_is_lost`, `stale_lease_cannot_touch_new_holder`, `owner_ids_are_unique` |
//! | 3. the server expires an unrenewed lease, by its clock | `crashed_holder_expires`, `unrenewed_lease_follows_scope`, `renew_keeps_lease_past_ttl`, `acquire_wakes_when_holder_crashes` |
//! | 4. fencing tokens strictly increase | `fencing_increases_across_releases`, `fencing_increases_across_expiry`, `fencing_is_per_name_monotonic` |
//! | 5. `acquire` returns only a valid lease | `acquire_free_lock`, `acquire_rides_out_a_short_outage` (and `late_grant_is_taken_again` in the kit) |
//! | 6. a dropped `acquire` leaks nothing beyond its TTL | `cancelled_acquires_leak_nothing` |
//! | 7. waiting uses notifications and is bounded by `wait` | `acquire_waits_for_release`, `acquire_times_out`, `acquire_with_zero_wait`, `waiters_are_served_fairly` (where `Capabilities::fair`) |
//! | 8. a release wakes one waiter, not all | `a_release_wakes_one_waiter` (the other waiters send no request, where `fair` and the links count them; with `notify`, the hand-off is faster than any poll) |
//! | 9. a client that releases and asks again at once does not starve a waiter | `a_busy_client_does_not_starve_a_waiter` (the lock, and a 1-permit semaphore where offered) |
//! | built on the rules, in core: holder values, election, multi-lock, hold limits | `holder_value_is_readable`, `one_leader_at_a_time`, `observe_sees_the_next_leader`, `leadership_is_lost_before_the_next_leader_wins`, `campaign_refuses_bad_values`, `requeued_elections_survive_leader_kills`, `proclaimed_values_are_seen_without_a_new_epoch`, `multi_lock_never_deadlocks`, `min_hold_blocks_after_release`, `min_hold_outlives_a_crash`, `max_hold_ends_the_hold`, `reentrant_scope_nests_and_excludes`, `fallback_serves_an_outage` |
//! | operators' reads and hand-overs: tickets, listing, who holds, revoking and breaking a holder | `tickets_carry_a_lease_between_clients` (SQL, Redis, Redlock, etcd, ZooKeeper; refused as unsupported by memory), `a_handed_over_guard_leaves_the_ticket_its_lock`, `list_shows_held_locks` (every server backend but Redis's plain layout), `process_holder_is_readable`, `break_holder_hands_the_lock_on`, `revoke_holder_lets_nobody_in_while_it_holds` |
//! | transient errors within `wait`; arguments | `unreachable_server_then_recovery`, `acquire_rides_out_a_short_outage`, `invalid_arguments`, `inspect_reports_holder` |

mod basics;
mod election;
mod expiry;
mod fallback;
mod fencing;
mod holds;
mod names;
mod network;
mod operators;
mod proclaim;
mod reentrancy;
mod requeue;
mod rwlock;
mod semaphore;
mod starvation;
mod tickets;
mod waiting;
mod workload;

pub use basics::*;
pub use election::*;
pub use expiry::*;
pub use fallback::*;
pub use fencing::*;
pub use holds::*;
pub use names::*;
pub use network::*;
pub use operators::*;
pub use proclaim::*;
pub use reentrancy::*;
pub use requeue::*;
pub use rwlock::*;
pub use semaphore::*;
pub use starvation::*;
pub use tickets::*;
pub use waiting::*;
pub use workload::*;

use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockError, LockName, random_u64};

use crate::TestClient;

/// A TTL long enough that no case sees it expire by accident.
pub(crate) const LONG_TTL: Duration = Duration::from_secs(30);

/// How soon a lease of `ttl` whose holder crashed must be free again: its TTL, the
/// backend's expiry slack, and 2 s for the waiter's wake-up on a busy machine.
pub(crate) fn expiry_bound(h: &impl crate::Harness, ttl: Duration) -> Duration {
    ttl + h.expiry_slack() + Duration::from_secs(2)
}

/// A fresh lock name per case run, so cases never see each other's locks.
pub(crate) fn unique(case: &str) -> LockName {
    LockName::new(&format!("conformance/{case}/{:016x}", random_u64())).expect("valid name")
}

pub(crate) use crate::steps::{assert_fresh, take, take_and_release};

/// A case's opening: `N` new, independent clients and a fresh name for `case`.
pub(crate) async fn clients_and_name<const N: usize>(
    h: &impl crate::Harness,
    case: &str,
) -> ([TestClient; N], LockName) {
    (clients(h).await, unique(case))
}

/// `N` new, independent clients of the backend under test.
pub(crate) async fn clients<const N: usize>(h: &impl crate::Harness) -> [TestClient; N] {
    let mut made = Vec::with_capacity(N);
    for _ in 0..N {
        made.push(h.client().await);
    }
    made.try_into()
        .unwrap_or_else(|_| unreachable!("exactly N clients were made"))
}

/// Polls `try_acquire` until it succeeds or `within` passes.
pub(crate) async fn take_within(
    client: &dyn DistributedLock,
    name: &LockName,
    ttl: Duration,
    within: Duration,
) -> Option<Lease> {
    let end = tokio::time::Instant::now() + within;
    loop {
        if let Some(lease) = client.try_acquire(name, ttl).await.expect("try_acquire") {
            assert_fresh(&lease);
            return Some(lease);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A shared primitive's case: a client and a fresh name for `case` when the backend
/// offers semaphores and read-write locks, `None` (having checked that it refuses them
/// as it should, see [`offers_shared`]) when it does not.
pub(crate) async fn shared_case(
    h: &impl crate::Harness,
    case: &str,
) -> Option<(TestClient, LockName)> {
    let (client, name) = (h.client().await, unique(case));
    offers_shared(&client, &name)
        .await
        .then_some((client, name))
}

/// Whether the backend offers semaphores and read-write locks
/// (`Capabilities::shared`). Where it does not, checks what it promises instead — every
/// shared call fails with the typed `Unsupported` error — and answers `false`, which
/// ends the case.
pub(crate) async fn offers_shared(c: &TestClient, name: &LockName) -> bool {
    if c.capabilities().shared {
        return true;
    }
    let wait = Duration::from_millis(200);
    let results = [
        c.try_acquire_permit(name, 2, LONG_TTL).await.map(|_| ()),
        c.acquire_permit(name, 2, LONG_TTL, wait).await.map(|_| ()),
        c.try_read(name, LONG_TTL).await.map(|_| ()),
        c.read(name, LONG_TTL, wait).await.map(|_| ()),
        c.try_write(name, LONG_TTL).await.map(|_| ()),
        c.write(name, LONG_TTL, wait).await.map(|_| ()),
        c.permit_holders(name).await.map(|_| ()),
        c.rw_holders(name).await.map(|_| ()),
    ];
    for r in results {
        assert!(matches!(r, Err(LockError::Unsupported { .. })), "{r:?}");
    }
    false
}
