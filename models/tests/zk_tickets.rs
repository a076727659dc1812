//! The ZooKeeper ticket model: the adapter's protocol holds; the defects a review found
//! in the protocol before it are found again by the checker, with their traces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_models::check::check;
use dlock_models::zk_tickets::Tickets;

#[test]
fn the_adapters_tickets_keep_one_holder() {
    let (horizon, renewals) = if dlock_models::check::deep() {
        (1500, 3)
    } else {
        (1300, 2)
    };
    let r = check(
        "zookeeper tickets",
        Tickets::adapter().bounded(horizon, renewals),
    );
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// The trust the adapter had before: the TTL less the drift margin, blind to the
/// servers' clocks being apart — a leader whose clock runs ahead deletes the node
/// while the taker still trusts its lease.
#[test]
fn trusting_past_the_clock_bound_is_found() {
    let ttl = Duration::from_millis(1000);
    let model = Tickets::adapter().trusting(ttl - dlock_core::drift_margin(ttl));
    let r = check("zookeeper tickets, trusted past the clock bound", model);
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}

/// The protocol before: a renewal wrote the node and trusted the gap between two
/// stamps; a delete decided on the old stamp lands after a retried renewal whose first
/// reply was lost.
#[test]
fn trusting_a_gap_after_a_late_write_is_found() {
    let r = check(
        "zookeeper tickets, write and measure",
        Tickets::write_and_measure(),
    );
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}

mod sessions {
    use dlock_models::check::check;
    use dlock_models::zk_sessions::Sessions;

    #[test]
    fn the_adapters_renewals_keep_one_holder() {
        let r = check("zookeeper sessions", Sessions::adapter());
        eprintln!("{r:?}");
        assert!(r.violation.is_none(), "{:#?}", r.violation);
    }

    /// A renewal read from a cut-off follower's copy: the leader expired the session and
    /// handed the lock on while the follower still showed the node.
    #[test]
    fn a_renewal_confirmed_by_a_cut_off_follower_is_found() {
        let r = check(
            "zookeeper sessions, follower reads",
            Sessions::follower_reads(),
        );
        let (property, trace) = r.violation.expect("the checker must find two holders");
        eprintln!("{property}:\n{trace}");
        assert_eq!(property, "exclusive");
    }

    /// Trust for the whole session timeout: the leader may have heard of the client
    /// last well before the renewal.
    #[test]
    fn trusting_the_whole_session_timeout_is_found() {
        let r = check(
            "zookeeper sessions, whole timeout",
            Sessions::trusting_the_timeout(),
        );
        let (property, trace) = r.violation.expect("the checker must find two holders");
        eprintln!("{property}:\n{trace}");
        assert_eq!(property, "exclusive");
    }
}
