//! Fenced writes on Redis with real lock tokens: a stale token is refused with
//! `StaleToken` and writes nothing; value and fence change in one script.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{redis, redis_url};
use dlock_conformance::{required_env, take, unique_name};
use dlock_core::{DistributedLock, Fence, LockError, random_u64};
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_refuse_stale_tokens() {
    fenced_writes_refuse_stale_tokens_on(&redis_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_refuse_stale_tokens_on_valkey_8_1() {
    fenced_writes_refuse_stale_tokens_on(&required_env("DLOCK_TEST_VALKEY_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_refuse_stale_tokens_on_redis_6_2() {
    fenced_writes_refuse_stale_tokens_on(&required_env("DLOCK_TEST_REDIS62_URL")).await;
}

async fn fenced_writes_refuse_stale_tokens_on(url: &str) {
    let lock = redis(url).await;
    let name = unique_name("fence");
    let older = take(&lock, &name, Duration::from_secs(5)).await;
    assert!(lock.release(&older).await.unwrap());
    let newer = take(&lock, &name, Duration::from_secs(5)).await;
    assert!(newer.token() > older.token());

    let fence = lock.fence();
    let key = format!("fence-test:{:016x}", random_u64());
    fence.set(&key, "new", newer.token()).await.unwrap();
    fence.set(&key, "new again", newer.token()).await.unwrap(); // the same holder
    let stale = fence.set(&key, "old", older.token()).await;
    assert!(
        matches!(&stale, Err(LockError::StaleToken { seen: Some(s), .. }) if *s == newer.token().get()),
        "{stale:?}"
    );
    let mut conn = common::raw(url).await;
    let v: String = conn.get(&key).await.unwrap();
    assert_eq!(v, "new again", "a refused write changes nothing");

    let hash = format!("fence-hash:{:016x}", random_u64());
    fence
        .hset(&hash, "total", "10", newer.token())
        .await
        .unwrap();
    let stale = fence.hset(&hash, "total", "5", older.token()).await;
    assert!(
        matches!(stale, Err(LockError::StaleToken { .. })),
        "{stale:?}"
    );
    // fences are per field
    fence
        .hset(&hash, "other", "1", older.token())
        .await
        .unwrap();
    let total: String = conn.hget(&hash, "total").await.unwrap();
    assert_eq!(total, "10");

    let zero = fence
        .set(
            &format!("fresh:{:016x}", random_u64()),
            "x",
            dlock_core::FencingToken::new(0),
        )
        .await;
    assert!(
        matches!(zero, Err(LockError::StaleToken { .. })),
        "{zero:?}"
    );
    // a fenced read raises the fence: an older holder cannot write after it
    let counter = format!("fence-counter:{:016x}", random_u64());
    assert_eq!(fence.get(&counter, older.token()).await.unwrap(), None);
    assert_eq!(fence.get(&counter, newer.token()).await.unwrap(), None);
    let late = fence.set(&counter, "1", older.token()).await;
    assert!(
        matches!(&late, Err(LockError::StaleToken { seen: Some(s), .. }) if *s == newer.token().get()),
        "{late:?}"
    );
    let late = fence.get(&counter, older.token()).await;
    assert!(
        matches!(late, Err(LockError::StaleToken { .. })),
        "{late:?}"
    );
    fence.set(&counter, "1", newer.token()).await.unwrap();
    assert_eq!(
        fence.get(&counter, newer.token()).await.unwrap().as_deref(),
        Some("1")
    );
    let resource = format!("res-{:016x}", random_u64());
    fence
        .check_and_raise(&resource, newer.token())
        .await
        .unwrap();
    let stale = fence.check_and_raise(&resource, older.token()).await;
    assert!(
        matches!(stale, Err(LockError::StaleToken { .. })),
        "{stale:?}"
    );
    assert!(lock.release(&newer).await.unwrap());
}
