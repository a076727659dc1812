//! One statement renews a batch of held locks: exactly the rows that are unexpired and
//! still carry the lease's owner and token, each with its own TTL — on every dialect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_core::{OwnerId, random_u64};

use crate::SqlLock;
use crate::store::{Renewal, Taken};

/// Takes `name` for a fresh owner for `ttl`: the renewal that would keep it.
async fn take(lock: &SqlLock, name: &str, ttl: Duration) -> Renewal {
    let owner = OwnerId::random().unwrap().as_str().to_owned();
    let Taken::Yes(token) = lock.store.try_take(name, &owner, ttl).await.unwrap() else {
        panic!("{name} is fresh");
    };
    Renewal {
        name: name.to_owned(),
        owner,
        token,
        ttl: Duration::from_secs(60),
    }
}

async fn left(lock: &SqlLock, name: &str) -> Option<Duration> {
    lock.store.holder(name).await.unwrap().map(|h| h.remaining)
}

async fn a_batch_renews_exactly_the_held_leases(url: &str) {
    let lock = SqlLock::connect(url).await.unwrap();
    let run = format!("renew-batch/{:016x}", random_u64());
    let short = Duration::from_secs(3);
    let held = take(&lock, &format!("{run}/held"), short).await;
    let wrong_token = {
        let r = take(&lock, &format!("{run}/token"), short).await;
        Renewal {
            token: r.token + 1,
            ..r
        }
    };
    let stranger = Renewal {
        owner: OwnerId::random().unwrap().as_str().to_owned(),
        ..take(&lock, &format!("{run}/owner"), short).await
    };
    let released = take(&lock, &format!("{run}/released"), short).await;
    assert!(matches!(
        lock.store
            .release(&released.name, &released.owner, released.token)
            .await
            .unwrap(),
        crate::store::Released::Yes { .. }
    ));
    let never = Renewal {
        name: format!("{run}/never"),
        owner: OwnerId::random().unwrap().as_str().to_owned(),
        token: 1,
        ttl: Duration::from_secs(60),
    };
    let also_held = Renewal {
        ttl: Duration::from_secs(30),
        ..take(&lock, &format!("{run}/also"), short).await
    };
    let batch = [held, wrong_token, stranger, released, never, also_held];
    assert_eq!(
        lock.store.renew_batch(&batch).await.unwrap(),
        [true, false, false, false, false, true]
    );
    // each renewed row got its own TTL; the others kept theirs
    let held_left = left(&lock, &batch[0].name).await.unwrap();
    assert!(held_left > Duration::from_secs(50), "{held_left:?}");
    let also_left = left(&lock, &batch[5].name).await.unwrap();
    assert!(
        also_left > Duration::from_secs(20) && also_left <= Duration::from_secs(30),
        "{also_left:?}"
    );
    for refused in &batch[1..3] {
        let l = left(&lock, &refused.name).await.unwrap();
        assert!(l <= short, "{}: {l:?}", refused.name);
    }
    assert_eq!(left(&lock, &batch[3].name).await, None);

    // a full batch in one statement
    let mut many = Vec::new();
    for i in 0..crate::RENEW_BATCH {
        many.push(take(&lock, &format!("{run}/many/{i}"), short).await);
    }
    let renewed = lock.store.renew_batch(&many).await.unwrap();
    assert!(
        renewed.iter().all(|r| *r),
        "{} renewed",
        renewed.iter().filter(|r| **r).count()
    );
}

on_every_dialect!(a_batch_renews_exactly_the_held_leases);
