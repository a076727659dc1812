//! The queue rule on ZooKeeper and etcd: core's standing and watch ranges lose no
//! wake-up for the mutex, read-write locks and semaphores; watching fewer does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dlock_models::check::check;
use dlock_models::queue_watch::Queue;

#[test]
fn the_rule_keeps_holders_compatible_and_wakes_every_waiter() {
    let n = if dlock_models::check::deep() { 7 } else { 6 };
    for (name, model) in [
        ("mutex queue", Queue::mutex(n - 1)),
        ("read-write queue", Queue::read_write(n)),
        ("semaphore queue", Queue::permits(n)),
        ("semaphore queue, two counts", Queue::mixed_permits(n)),
    ] {
        let r = check(name, model);
        eprintln!("{r:?}");
        assert!(r.violation.is_none(), "{name}: {:#?}", r.violation);
    }
}

/// A permit waiter behind holders A and B that watched only B sleeps through A's
/// release (core's rule watches the n entries right before it).
#[test]
fn a_permit_waiter_watching_only_its_predecessor_is_found() {
    let r = check(
        "semaphore queue, predecessor only",
        Queue::permits(4).watching_the_predecessor(),
    );
    let (property, trace) = r.violation.expect("the checker must find a lost wake-up");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "no lost wake-up");
}

/// The earlier permit rule: behind [A(2), B(3), C(3)] a waiter of 2 watched B and C
/// only; A's release leaves B the oldest, the waiter refused, asleep — and a permit
/// idle for the callers of 3 behind it.
#[test]
fn a_refused_waiter_left_asleep_is_found() {
    let r = check(
        "semaphore queue, two counts, the earlier rule",
        Queue::mixed_permits(6).watching_from_the_first_foreign_count(),
    );
    let (property, trace) = r.violation.expect("the checker must find a lost wake-up");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "no lost wake-up");
}
