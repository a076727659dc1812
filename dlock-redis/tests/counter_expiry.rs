//! A released lock's fencing counter expires after the retention, so names nobody uses
//! leave no key behind; a name taken again after that still gets a larger token (the
//! server clock), and a held lock's counter never expires.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_conformance::{assert_later, take};
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

/// A client of the test server with `options` in its URL's query.
async fn connect_with(options: &str) -> Result<RedisLock, LockError> {
    RedisLock::connect(&format!("{}?{options}", common::redis_url())).await
}

/// A client whose counters outlive their last holder by a second.
async fn retaining_a_second() -> RedisLock {
    connect_with("counter-retention=1s").await.unwrap()
}

async fn pttl(url: &str, key: &str) -> i64 {
    common::raw(url).await.pttl(key).await.unwrap()
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
    let first = take(lock, &n, LONG).await;
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
    let second = take(lock, &n, LONG).await;
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
    let third = take(lock, &n, LONG).await;
    assert_later(
        &third,
        &second,
        "a name whose counter expired starts above its old tokens",
    );
    assert!(lock.release(&third).await.unwrap());
}

#[tokio::test]
async fn redis_counter_expires_after_release() {
    let lock = retaining_a_second().await;
    counter_expires_after_release(&lock, &[common::redis_url()], Duration::ZERO).await;
}

#[tokio::test]
async fn redlock_counters_expire_after_release() {
    let urls = common::redlock_urls();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    // shared servers, restarted by other tests: no restart delay (see common::redlock)
    let lock = Redlock::builder(&refs)
        .restart_delay(Duration::ZERO)
        .counter_retention(RETENTION)
        .connect()
        .await
        .unwrap();
    // a Redlock round proposes up to a second above the nodes' clocks
    counter_expires_after_release(&lock, &urls, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_retention_outside_a_second_to_ten_years_is_refused() {
    let err = connect_with("counter-retention=10ms").await.unwrap_err();
    assert!(matches!(err, LockError::Config(_)), "{err}");
    for wrong in [Duration::from_millis(10), Duration::MAX] {
        let err = RedisLock::builder(&common::redis_url())
            .counter_retention(wrong)
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{wrong:?}: {err}");
    }
}

/// A semaphore's and a read-write lock's keys: while held, the holder set, tokens and
/// count expire with the last lease, the counter never; released by the last holder,
/// only the counter stays, for the retention; a crashed holder's keys go with its
/// lease, the counter staying (as the mutex's).
#[tokio::test]
async fn shared_keys_expire_with_their_holders() {
    use dlock_core::{DistributedRwLock, DistributedSemaphore};
    let url = common::redis_url();
    let lock = retaining_a_second().await;
    let ttl = Duration::from_secs(5);
    let held_bound = i64::try_from((ttl + Duration::from_secs(1)).as_millis()).unwrap() + 50;
    let gone_bound = i64::try_from(RETENTION.as_millis()).unwrap() + 50;
    for space in ["sem", "rw"] {
        let n = name();
        let base = format!("dlock:{{{}}}:{space}", n.as_str());
        let (holders, tokens, meta, fence) = (
            base.clone(),
            format!("{base}:tokens"),
            format!("{base}:meta"),
            format!("{base}:fence"),
        );
        let lease = if space == "sem" {
            lock.try_acquire_permit(&n, 3, ttl).await.unwrap().unwrap()
        } else {
            lock.try_write(&n, ttl).await.unwrap().unwrap()
        };
        for key in [&holders, &tokens, &meta] {
            let left = pttl(&url, key).await;
            assert!(
                left > 0 && left <= held_bound,
                "{space} held: {key} expires with the lease, PTTL {left}"
            );
        }
        assert_eq!(
            pttl(&url, &fence).await,
            -1,
            "{space} held: the counter stays"
        );
        assert!(lock.release(&lease).await.unwrap());
        for key in [&holders, &tokens, &meta] {
            assert_eq!(pttl(&url, key).await, -2, "{space} released: {key} is gone");
        }
        let left = pttl(&url, &fence).await;
        assert!(
            left > 0 && left <= gone_bound,
            "{space} released: the counter expires within the retention, PTTL {left}"
        );
        // a holder that never releases: its keys go with its lease
        let short = Duration::from_secs(1);
        let crashed = if space == "sem" {
            lock.try_acquire_permit(&n, 3, short)
                .await
                .unwrap()
                .unwrap()
        } else {
            lock.try_write(&n, short).await.unwrap().unwrap()
        };
        assert!(crashed.token() > lease.token());
        tokio::time::sleep(short + Duration::from_millis(1300)).await;
        for key in [&holders, &tokens, &meta] {
            assert_eq!(pttl(&url, key).await, -2, "{space} crashed: {key} is gone");
        }
    }
}

/// In the plain layout, name `{x}:token`'s lock key is name `{x}`'s fencing counter:
/// taking it is refused, so the counter is never mistaken for a lock (nor overwritten
/// by one) and `{x}`'s tokens keep growing.
#[tokio::test]
async fn a_plain_name_cannot_take_another_names_counter() {
    let lock = connect_with("layout=plain").await.unwrap();
    let x = LockName::new(&format!("{{plain-{:016x}}}", random_u64())).unwrap();
    let first = take(&lock, &x, LONG).await;
    assert!(lock.release(&first).await.unwrap());
    let counter = LockName::new(&format!("{}:token", x.as_str())).unwrap();
    let taken = lock.try_acquire(&counter, LONG).await;
    assert!(
        matches!(taken, Err(LockError::InvalidName { .. })),
        "{taken:?}"
    );
    let second = take(&lock, &x, LONG).await;
    assert!(second.token() > first.token());
    assert!(lock.release(&second).await.unwrap());
}
