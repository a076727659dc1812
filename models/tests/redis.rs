//! The Redis models: the token's hybrid clock on one server, and Redlock's proposals
//! over restarting nodes and skewed clients; each with the defect a review once found.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dlock_models::check::{check, find};
use dlock_models::redis_grants::{self, RedisGrants};
use dlock_models::redis_tokens::RedisTokens;
use dlock_models::redlock::Redlock;

#[test]
fn the_scripts_tokens_never_repeat_across_a_restore() {
    let model = if dlock_models::check::deep() {
        RedisTokens::scripts().deep()
    } else {
        RedisTokens::scripts()
    };
    let r = check("redis tokens", model);
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// The token before the hybrid clock: a restore from an older snapshot repeats one.
#[test]
fn a_counter_only_token_repeats_after_a_restore() {
    let r = check("redis tokens, counter only", RedisTokens::counter_only());
    let (property, trace) = r.violation.expect("the checker must find a repeated token");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "tokens strictly increase");
}

#[test]
fn redlock_tokens_increase_and_stay_near_the_clocks() {
    let model = if dlock_models::check::deep() {
        Redlock::scripts().deep()
    } else {
        Redlock::scripts()
    };
    let r = check("redlock", model);
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// A bound measured from the node's own counter: skewed clients carry the tokens ahead
/// of the clocks.
#[test]
fn a_bound_from_the_nodes_own_counter_lets_tokens_ratchet() {
    let r = check("redlock, own-counter bound", Redlock::own_counter_bound());
    let (property, trace) = r.violation.expect("the checker must find the ratchet");
    eprintln!("{property}:\n{trace}");
    assert!(
        property == "tokens stay within reach of the clocks"
            || property == "tokens strictly increase",
        "{property}"
    );
}

#[test]
fn a_grant_message_is_taken_only_as_core_rules() {
    let model = if dlock_models::check::deep() {
        RedisGrants::adapter().deep()
    } else {
        RedisGrants::adapter()
    };
    let r = check("redis grants", model);
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// Without the counter check, a grant message from an earlier wait is taken as this
/// wait's: the client trusts a lease the server never gave it.
#[test]
fn a_message_taken_whatever_its_token_is_found() {
    // a grant from before the waiter's last queued answer needs four attempts
    let r = find(
        "redis grants, any token",
        RedisGrants::adapter().deep().with(redis_grants::any_token),
    );
    let (property, trace) = r.violation.expect("the checker must find the stale grant");
    eprintln!("{property}:\n{trace}");
    assert!(
        property.starts_with("no two clients") || property.starts_with("a token"),
        "{property}"
    );
}

/// A lease dated from the message's arrival outlives the grant when the message is
/// late.
#[test]
fn a_lease_dated_by_the_message_is_found() {
    let r = find(
        "redis grants, dated by arrival",
        RedisGrants::adapter().with(redis_grants::dated_by_arrival),
    );
    let (property, trace) = r.violation.expect("the checker must find the late message");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "no two clients trust a lease at once");
}
