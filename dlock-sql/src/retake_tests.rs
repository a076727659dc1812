//! A late duplicate of our own acquire statement (an attempt given up on, committed
//! after the attempt that won) must find the row ours and leave the token alone:
//! bumping it would strand the holder's lease, whose renewals and release carry the
//! token they were granted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_conformance::unique_name;
use dlock_core::{LockName, OwnerId};

use crate::SqlLock;
use crate::store::Taken;

/// The token `owner` got by one acquire statement on `name`, or a panic saying `why`
/// it should have got one.
async fn taken(
    store: &std::sync::Arc<dyn crate::store::Store>,
    name: &LockName,
    owner: &OwnerId,
    ttl: Duration,
    why: &str,
) -> i64 {
    match store
        .try_take(name.as_str(), owner.as_str(), ttl)
        .await
        .unwrap()
    {
        Taken::Yes(token) => token,
        _ => panic!("{why}"),
    }
}

async fn a_duplicate_take_keeps_the_token(url: &str) {
    let lock = SqlLock::connect(url).await.unwrap();
    let name = unique_name("retake");
    let owner = OwnerId::random().unwrap();
    let ttl = Duration::from_secs(30);
    let store = &lock.store;
    let first = taken(store, &name, &owner, ttl, "a fresh name is free").await;
    let again = taken(
        store,
        &name,
        &owner,
        ttl,
        "a row already ours counts as free for us",
    )
    .await;
    assert_eq!(again, first, "the token moved under its holder");
    let renewal = crate::store::Renewal {
        name: name.as_str().to_owned(),
        owner: owner.as_str().to_owned(),
        token: first,
        ttl,
    };
    assert_eq!(store.renew_batch(&[renewal]).await.unwrap(), [true]);
    assert!(matches!(
        store
            .release(name.as_str(), owner.as_str(), first)
            .await
            .unwrap(),
        crate::store::Released::Yes { .. }
    ));
    // once released, the row is free again: the next holder gets a higher token
    let other = OwnerId::random().unwrap();
    let next = taken(store, &name, &other, ttl, "released").await;
    assert!(next > first);
}

/// A late duplicate of our own acquire statement must not shorten the row's expiry
/// either: the holder may have renewed meanwhile, and its lease counts on the renewed
/// expiry. (A duplicate's expiry is computed when its statement began, which on
/// PostgreSQL and MySQL can be long before it commits: it may have waited for the row
/// lock of the very renewal it would undo.) Simulated with a shorter TTL on the
/// duplicate: the same arithmetic as an earlier start.
async fn a_duplicate_take_never_shortens_the_expiry(url: &str) {
    let lock = SqlLock::connect(url).await.unwrap();
    let name = unique_name("retake");
    let owner = OwnerId::random().unwrap();
    let store = &lock.store;
    let first = taken(
        store,
        &name,
        &owner,
        Duration::from_secs(30),
        "a fresh name is free",
    )
    .await;
    let again = taken(
        store,
        &name,
        &owner,
        Duration::from_secs(2),
        "a row already ours counts as free for us",
    )
    .await;
    assert_eq!(again, first);
    let left = store
        .holder(name.as_str())
        .await
        .unwrap()
        .unwrap()
        .remaining;
    assert!(
        left > Duration::from_secs(20),
        "the duplicate shortened the holder's expiry to {left:?}"
    );
}

on_every_dialect!(
    a_duplicate_take_keeps_the_token,
    a_duplicate_take_never_shortens_the_expiry
);
