//! The etcd revoke model: the adapter's protocol keeps one holder; the revoke and the
//! trust before it are found out by the checker, with their traces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dlock_models::check::check;
use dlock_models::etcd_revoke::Revoke;

#[test]
fn the_adapters_revoke_keeps_one_holder() {
    let (acquisitions, leader_changes) = if dlock_models::check::deep() {
        (2, 1)
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

/// The hold lease without its slack: the guard's marker outlives its lease until the
/// leader revokes it, and a move landing then leaves less than the holder's trust.
#[test]
fn a_hold_lease_without_slack_is_found() {
    let r = check(
        "etcd revoke, no slack",
        Revoke::adapter().bounded(1, 0).without_slack(),
    );
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}
