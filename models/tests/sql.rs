//! The SQL claim model: the statements keep one holder and rising tokens, an
//! operator's revoke included; the duplicate take that once shortened an expiry, and
//! an operator's break, are found again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dlock_models::check::check;
use dlock_models::sql_claim::SqlClaim;

#[test]
fn the_statements_keep_one_holder_and_rising_tokens() {
    let model = if dlock_models::check::deep() {
        SqlClaim::statements().deep()
    } else {
        SqlClaim::statements()
    };
    let r = check("sql claim", model);
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// An operator's revoke at any step (CI: for a TTL; the deep run above has it too)
/// keeps one holder: the revoked one trusts its lease no longer than the row keeps it.
#[test]
fn a_revoke_keeps_one_holder() {
    let r = check("sql claim, operator revokes", SqlClaim::revoking());
    eprintln!("{r:?}");
    assert!(r.violation.is_none(), "{:#?}", r.violation);
}

/// A duplicate take, begun before a renewal and applied after it, writing its own
/// (earlier) expiry over the row's: the row expires while its holder still trusts it.
#[test]
fn a_duplicate_take_that_shortens_the_expiry_is_found() {
    let r = check("sql claim, newest expiry", SqlClaim::newest_expiry());
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}

/// An operator breaking the holder (its row released as its own release would) instead
/// of revoking it: the next client takes the row while the broken one still trusts its
/// lease.
#[test]
fn a_break_instead_of_a_revoke_is_found() {
    let r = check("sql claim, operator breaks", SqlClaim::breaking());
    let (property, trace) = r.violation.expect("the checker must find two holders");
    eprintln!("{property}:\n{trace}");
    assert_eq!(property, "exclusive");
}
