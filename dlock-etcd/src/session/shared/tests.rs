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
