//! The shared-lease bookkeeping, without a server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const TTL: Duration = Duration::from_secs(9);

fn leases() -> SharedLeases {
    let l = SharedLeases::default();
    l.install(9, 1, TTL, Instant::now());
    l
}

#[tokio::test]
async fn a_fresh_lease_is_usable_and_an_aging_one_asks_for_one_refresh() {
    let l = leases();
    let (u, refresh) = l.usable(9);
    assert_eq!(u.map(|u| u.id), Some(1));
    assert!(!refresh);
    l.install(9, 2, TTL, Instant::now() - TTL / 5);
    let (u, refresh) = l.usable(9);
    assert!(u.is_some_and(|u| u.aging && u.id == 2));
    assert!(refresh);
    assert!(!l.usable(9).1, "one refresh at a time");
    l.refresh_done(9);
    l.install(9, 3, TTL, Instant::now() - TTL / 2);
    assert!(
        l.usable(9).0.is_none(),
        "a third of the TTL gone: not usable"
    );
}

#[tokio::test]
async fn held_keys_are_released_once_and_stale_revisions_are_not_held() {
    let l = leases();
    let far = Instant::now() + TTL;
    l.expect(1, "k", far);
    assert!(
        matches!(l.lookup(1, "k", 7), Lookup::NotHeld),
        "not confirmed yet"
    );
    l.confirm(1, "k", 7, far);
    assert!(matches!(l.lookup(1, "k", 7), Lookup::Held { .. }));
    assert!(matches!(l.lookup(1, "k", 6), Lookup::NotHeld));
    assert!(matches!(l.lookup(5, "k", 7), Lookup::Unknown));
    assert!(!l.release(1, "k", 6));
    assert!(l.release(1, "k", 7));
    assert!(!l.release(1, "k", 7));
    assert!(matches!(l.lookup(1, "k", 7), Lookup::NotHeld));
}

#[tokio::test]
async fn unrenewed_keys_expire_and_renewed_ones_do_not() {
    let l = leases();
    let now = Instant::now();
    for k in ["a", "b"] {
        l.expect(1, k, now + Duration::from_secs(1));
        l.confirm(1, k, 3, now + Duration::from_secs(1));
    }
    assert!(l.extend(1, "b", 3, now + Duration::from_secs(5)));
    let (due, next) = l.expired(now + Duration::from_secs(2));
    assert_eq!(
        due,
        vec![Expired {
            lease: 1,
            key: "a".into()
        }]
    );
    assert_eq!(next, Some(now + Duration::from_secs(5)));
    assert!(matches!(l.lookup(1, "a", 3), Lookup::NotHeld), "swept");
    assert!(
        !l.extend(1, "a", 3, now + TTL),
        "a swept key cannot be renewed"
    );
    l.swept(&due[0]);
    assert!(matches!(l.lookup(1, "b", 3), Lookup::Held { .. }));
}

#[tokio::test]
async fn keys_deleted_behind_our_back_and_dead_leases_are_not_held() {
    let l = leases();
    let far = Instant::now() + TTL;
    for k in ["a", "b"] {
        l.expect(1, k, far);
        l.confirm(1, k, 3, far);
    }
    let sent = Instant::now();
    l.expect(1, "late", far);
    l.confirm(1, "late", 4, far);
    // a check sent before "late" was confirmed cannot judge it
    l.attached(1, sent, &HashSet::from(["a".to_owned()]), far);
    assert!(matches!(l.lookup(1, "a", 3), Lookup::Held { .. }));
    assert!(matches!(l.lookup(1, "b", 3), Lookup::NotHeld));
    assert!(matches!(l.lookup(1, "late", 4), Lookup::Held { .. }));
    l.dead(1);
    assert!(!matches!(l.lookup(1, "a", 3), Lookup::Held { .. }));
    assert!(l.usable(9).0.is_none(), "a dead lease is not handed out");
}

#[tokio::test]
async fn attached_keys_nobody_tracks_are_swept_after_the_grace_period() {
    let l = leases();
    let far = Instant::now() + TTL;
    l.expect(1, "mine", far);
    l.confirm(1, "mine", 3, far);
    let now = Instant::now();
    let grace = now + Duration::from_secs(2);
    let keys = HashSet::from(["mine".to_owned(), "stray".to_owned()]);
    l.attached(1, now, &keys, grace);
    assert!(
        l.expired(now).0.is_empty(),
        "not before the grace period ends"
    );
    let (due, _) = l.expired(grace);
    assert_eq!(
        due,
        vec![Expired {
            lease: 1,
            key: "stray".into()
        }]
    );
    assert!(matches!(l.lookup(1, "mine", 3), Lookup::Held { .. }));
    assert!(matches!(l.lookup(1, "stray", 0), Lookup::NotHeld));
}

#[tokio::test]
async fn a_full_lease_takes_no_more_keys() {
    let l = leases();
    let far = Instant::now() + TTL;
    for i in 0..KEYS_PER_LEASE - 1 {
        l.expect(1, &format!("k{i}"), far);
    }
    assert_eq!(l.usable(9).0.map(|u| u.id), Some(1));
    l.expect(1, "last", far);
    assert!(
        l.usable(9).0.is_none(),
        "{KEYS_PER_LEASE} keys: new acquisitions need a new lease"
    );
}

#[tokio::test]
async fn one_attached_keys_read_at_a_time_and_not_more_than_once_per_grid_step() {
    let l = leases();
    let short = Duration::from_millis(300);
    l.install(1, 5, short, Instant::now());
    assert!(l.start_check(5));
    assert!(!l.start_check(5), "one in flight");
    l.check_done(5);
    assert!(!l.start_check(5), "not again within a grid step");
    tokio::time::sleep(short / 3).await;
    assert!(l.start_check(5));
    assert!(!l.start_check(99), "an unknown lease is not read");
}

#[tokio::test]
async fn a_renewal_on_a_fresh_lease_needs_no_request() {
    let l = leases();
    let now = Instant::now();
    l.expect(1, "k", now + TTL);
    l.confirm(1, "k", 7, now + TTL / 2);
    let (granted, _, _) = l.renew_if_fresh(1, "k", 7).expect("fresh: renewed locally");
    assert_eq!(granted, TTL);
    assert!(l.renew_if_fresh(1, "k", 8).is_none(), "another revision");
    l.install(9, 2, TTL, now - TTL / 2);
    l.expect(2, "j", now + TTL);
    l.confirm(2, "j", 9, now + TTL);
    assert!(
        l.renew_if_fresh(2, "j", 9).is_none(),
        "a lease not refreshed within the grid step goes the slow way"
    );
}

#[tokio::test]
async fn a_lease_replaced_before_its_first_key_is_noted_is_kept() {
    // two acquisitions race for a lease: the first is handed lease 1, the second's
    // grant (lease 2) becomes the current one before the first notes its key
    let l = SharedLeases::default();
    let now = Instant::now();
    l.install(9, 1, TTL, now);
    l.install(9, 2, TTL, now);
    l.expect(1, "k", now + TTL);
    l.confirm(1, "k", 7, now + TTL);
    assert!(
        matches!(l.lookup(1, "k", 7), Lookup::Held { .. }),
        "the key on lease 1 is tracked and can be renewed"
    );
}

#[tokio::test]
async fn a_key_is_trusted_two_ttls_past_the_last_read_that_showed_it() {
    let l = leases();
    let far = Instant::now() + 10 * TTL;
    let before = Instant::now();
    l.expect(1, "k", far);
    let after = Instant::now();
    l.confirm(1, "k", 7, far);
    let bound = |l: &SharedLeases| match l.lookup(1, "k", 7) {
        Lookup::Held { seen_bound, .. } => seen_bound,
        other => panic!("{other:?}"),
    };
    let trusted = trusted_after_seen(TTL);
    let margin = trusted - dlock_core::drift_margin(trusted);
    let first = bound(&l);
    assert!(
        first >= before + margin && first <= after + margin,
        "from before the create was sent"
    );
    // keep-alives alone do not move it
    l.refreshed(1, Instant::now() + TTL);
    assert_eq!(bound(&l), first);
    // a read that still shows the key does, from when it was sent
    let sent = Instant::now() + TTL;
    l.attached(1, sent, &HashSet::from(["k".to_owned()]), far);
    assert_eq!(bound(&l), sent + margin);
    // an answer to a read sent earlier moves nothing back
    l.attached(1, before, &HashSet::from(["k".to_owned()]), far);
    assert_eq!(bound(&l), sent + margin);
    let (_, _, fresh) = l
        .renew_if_fresh(1, "k", 7)
        .expect("refreshed within a step");
    assert_eq!(fresh, sent + margin);
}
