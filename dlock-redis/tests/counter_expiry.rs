//! A released lock's fencing counter expires after the retention, so names nobody uses
//! leave no key behind; a name taken again after that still gets a larger token (the
//! server clock), and a held lock's counter never expires.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_core::{DistributedLock, LockError, LockName, random_u64};
use dlock_redis::{RedisLock, Redlock};
use redis::AsyncCommands;

const LONG: Duration = Duration::from_secs(60);
const RETENTION: Duration = Duration::from_secs(1);

fn name() -> LockName {
    LockName::new(&format!("counter-expiry-{:016x}", random_u64())).unwrap()
}

fn fence_key(n: &LockName) -> String {
    format!("dlock:{{{}}}:fence", n.as_str())
}

async fn pttl(url: &str, key: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    c.pttl(key).await.unwrap()
}

/// The counter's TTL on every node: none while held, the retention (plus `ahead`, how far
/// a token may run ahead of a node's clock) after release, gone after it; then the name
/// starts above its old token.
async fn counter_expires_after_release(
    lock: &dyn DistributedLock,
    urls: &[String],
    ahead: Duration,
) {
    let bound = i64::try_from((RETENTION + ahead).as_millis()).unwrap() + 50;
    let n = name();
    let key = fence_key(&n);
    let first = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
    for u in urls {
        assert_eq!(pttl(u, &key).await, -1, "held: the counter has no expiry");
    }
    assert!(lock.release(&first).await.unwrap());
    for u in urls {
        let left = pttl(u, &key).await;
        assert!(
            left > 0 && left <= bound,
            "released: the counter expires within the retention, PTTL {left}"
        );
    }
    // taken again within the retention: the expiry is cleared, the token grows
    let second = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
    assert!(second.token() > first.token());
    for u in urls {
        assert_eq!(pttl(u, &key).await, -1, "held again: no expiry");
    }
    assert!(lock.release(&second).await.unwrap());
    tokio::time::sleep(RETENTION + ahead + Duration::from_millis(300)).await;
    for u in urls {
        assert_eq!(
            pttl(u, &key).await,
            -2,
            "idle past the retention: no key left"
        );
    }
    let third = lock.try_acquire(&n, LONG).await.unwrap().unwrap();
    assert!(
        third.token() > second.token(),
        "{} after {}: a name whose counter expired starts above its old tokens",
        third.token(),
        second.token()
    );
    assert!(lock.release(&third).await.unwrap());
}

#[tokio::test]
async fn redis_counter_expires_after_release() {
    let url = common::redis_url();
    let lock = RedisLock::builder(&format!("{url}?counter-retention=1s"))
        .connect()
        .await
        .unwrap();
    counter_expires_after_release(&lock, &[url], Duration::ZERO).await;
}

#[tokio::test]
async fn redlock_counters_expire_after_release() {
    let urls = common::redlock_urls();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let lock = Redlock::builder(&refs)
        .counter_retention(RETENTION)
        .connect()
        .await
        .unwrap();
    // a Redlock round proposes up to a second above the nodes' clocks
    counter_expires_after_release(&lock, &urls, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_retention_outside_a_second_to_ten_years_is_refused() {
    let url = common::redis_url();
    let err = RedisLock::connect(&format!("{url}?counter-retention=10ms"))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Config(_)), "{err}");
    for wrong in [Duration::from_millis(10), Duration::MAX] {
        let err = RedisLock::builder(&url)
            .counter_retention(wrong)
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{wrong:?}: {err}");
    }
}
