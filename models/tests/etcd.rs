//! The etcd revoke model: the adapter's protocol keeps one holder; the revoke and the
//! trust before it are found out by the checker, with their traces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dlock_models::check::{check, find};
use dlock_models::etcd_revoke::Revoke;

#[test]
fn the_adapters_revoke_keeps_one_holder() {
    let (acquisitions, leader_changes) = if dlock_models::check::deep() {
        (1, 1)
    } else {
        (1, 0)
    };
    let r = check(
        "etcd revoke",
        Revoke::adapter().bounded(acquisitions, leader_changes),
    );
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// The revoke before: the hold lease granted for twice the TTL and a second, then the
/// move, unguarded — an operator paused between the two moves the key onto a lease
/// that is nearly over, and the next in line gets it while the holder still trusts.
#[test]
fn an_unguarded_move_is_found() {
    let r = check(
        "etcd revoke, unguarded",
        Revoke::adapter().bounded(1, 0).unguarded(),
    );
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}

/// The holder before: every answered keep-alive trusted for a TTL, though the reads
/// of its lease's keys went unanswered — its key was moved off the lease long ago.
#[test]
fn trusting_every_keep_alive_is_found() {
    let r = check(
        "etcd revoke, every keep-alive trusted",
        Revoke::adapter().bounded(1, 0).trusting_every_keep_alive(),
    );
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}

/// A hold lease a second short of the guard, the trust and the slack: with the
/// guard's marker lingering its longest and the operator dead before its keep-alive,
/// a late move leaves less than the holder's trust.
#[test]
fn a_hold_lease_a_second_short_is_found() {
    let r = find(
        "etcd revoke, a second short",
        Revoke::adapter().bounded(1, 0).a_second_short(),
    );
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}
