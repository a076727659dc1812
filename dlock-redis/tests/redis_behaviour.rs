//! What the Redis backends promise beyond the shared suite.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlock_conformance::{
    FaultMode, assert_config_error, assert_later, assert_unreachable, take, take_and_release,
    take_once_back,
};
use dlock_core::{DistributedLock, LockError, LockName, random_u64};
use dlock_redis::{RedisLock, Redlock};

const LONG: Duration = Duration::from_secs(30);

fn name(case: &str) -> LockName {
    LockName::new(&format!("redis/{case}/{:016x}", random_u64())).unwrap()
}

/// Asserts that the median time from the holder's release returning to the blocked
/// waiter holding the lock, over a few trials, is under 50 ms. With a 30 s lease and a
/// 0.5–1 s fallback, only the pub/sub message can make it that small.
async fn woken_by_the_release(holder: Arc<dyn DistributedLock>, waiter: Arc<dyn DistributedLock>) {
    let n = name("handoff");
    let mut samples = Vec::new();
    for _ in 0..7 {
        let held = take(&holder, &n, LONG).await;
        let w = {
            let (waiter, n) = (Arc::clone(&waiter), n.clone());
            tokio::spawn(async move {
                let l = waiter
                    .acquire(&n, LONG, Duration::from_secs(20))
                    .await
                    .unwrap();
                (l, Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(holder.release(&held).await.unwrap());
        let released = Instant::now();
        let (lease, at) = w.await.unwrap();
        samples.push(at.saturating_duration_since(released));
        assert!(waiter.release(&lease).await.unwrap());
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    assert!(
        median < Duration::from_millis(50),
        "median hand-off {median:?}"
    );
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_waiter_is_woken_by_the_release_message() {
    let url = common::redis_url();
    woken_by_the_release(
        Arc::new(common::redis(&url).await),
        Arc::new(common::redis(&url).await),
    )
    .await;
}

#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_waiter_is_woken_by_the_release_message() {
    let urls = common::redlock_urls();
    let [holder, waiter] = [common::redlock(&urls).await, common::redlock(&urls).await];
    woken_by_the_release(Arc::new(holder), Arc::new(waiter)).await;
}

/// With 2 of 5 nodes unreachable Redlock still grants, renews and releases; with 3 of
/// 5 it refuses (no lease) with `Unavailable`; once healed it works again, and tokens
/// keep increasing throughout.
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_survives_two_of_five_down_and_refuses_with_three() {
    let (urls, proxies) = common::proxied(&common::redlock_urls()).await;
    let lock = common::redlock(&urls).await;
    assert_eq!(lock.quorum(), 3);
    let n = name("quorum");
    let first = take(&lock, &n, LONG).await;
    assert!(lock.release(&first).await.unwrap());

    for p in &proxies.0[..2] {
        p.set_mode(FaultMode::Blackhole);
        p.reset();
    }
    let second = lock
        .try_acquire(&n, LONG)
        .await
        .unwrap()
        .expect("3 of 5 is a quorum");
    assert!(second.token() > first.token());
    let renewed = lock.renew(&second).await.expect("renew on 3 of 5");
    assert!(lock.inspect(&n).await.unwrap().is_some());
    assert!(lock.release(&renewed).await.unwrap());

    proxies.0[2].set_mode(FaultMode::Blackhole);
    proxies.0[2].reset();
    let r = lock.try_acquire(&n, LONG).await;
    assert!(
        matches!(r, Err(LockError::Unavailable { .. })),
        "2 of 5 must not grant: {r:?}"
    );
    let r = lock.acquire(&n, LONG, Duration::from_millis(500)).await;
    assert!(r.is_err(), "no lease without a quorum: {r:?}");

    proxies.set_mode(FaultMode::Pass);
    let third = take_once_back(
        &lock,
        &n,
        LONG,
        Duration::from_secs(10),
        "no recovery after heal",
    )
    .await;
    assert!(third.token() > second.token());
    assert!(lock.release(&third).await.unwrap());
}

/// Another prefix is another key space.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn prefixes_separate_key_spaces() {
    let url = common::redis_url();
    let a = RedisLock::builder(&url)
        .prefix("app-a:")
        .connect()
        .await
        .unwrap();
    let b = RedisLock::connect(&format!("{url}?prefix=app-b:"))
        .await
        .unwrap();
    let n = name("prefix");
    let la = take(&a, &n, LONG).await;
    let lb = b
        .try_acquire(&n, LONG)
        .await
        .unwrap()
        .expect("different prefix, different lock");
    assert!(a.release(&la).await.unwrap() && b.release(&lb).await.unwrap());
}

#[tokio::test]
async fn bad_configuration_and_unreachable_servers_are_typed_errors() {
    let bad_prefix = RedisLock::builder("redis://127.0.0.1:6379").prefix("x{y}");
    assert_config_error(bad_prefix.connect().await, "");
    let bad_timeout = "redis://:hunter2@127.0.0.1:6379?timeout=soon";
    assert_config_error(RedisLock::connect(bad_timeout).await, "hunter2");
    assert_config_error(RedisLock::connect("nonsense://x").await, "");
    let nobody =
        RedisLock::builder("redis://:hunter2@127.0.0.1:1").timeout(Duration::from_millis(500));
    assert_unreachable(nobody.connect(), "hunter2", Duration::from_secs(5)).await;
    assert_config_error(Redlock::connect(&[]).await, "");
}

/// The fencing token is `max(counter + 1, server time in µs)`, so a counter lost with
/// the server's data still hands out larger tokens.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn a_lost_counter_restarts_above_earlier_tokens() {
    let url = common::redis_url();
    let lock = common::redis(&url).await;
    let n = name("seed");
    let first = take(&lock, &n, LONG).await;
    assert!(
        first.token().get() > 1_000_000_000_000_000,
        "seeded from TIME in µs: {}",
        first.token()
    );
    assert!(lock.release(&first).await.unwrap());
    let second = take(&lock, &n, LONG).await;
    assert!(second.token() > first.token());
    assert!(lock.release(&second).await.unwrap());
    // lose the counter, as a restart without persistence would
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = format!("dlock:{{{}}}:fence", n.as_str());
    let deleted: i64 = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1, "the counter lives at {key}");
    let third = take(&lock, &n, LONG).await;
    assert_later(&third, &second, "the counter was lost");
    assert!(lock.release(&third).await.unwrap());
}

/// An ACL user and password from the URL authenticate; a wrong password is a `Config`
/// error that does not print the password.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn acl_user_from_the_url() {
    let url = common::redis_url();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let user = format!("dlock{:08x}", random_u64() as u32);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">s3cret-pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let with_user = url.replacen("redis://", &format!("redis://{user}:s3cret-pw@"), 1);
    let lock = RedisLock::connect(&with_user).await.unwrap();
    let n = name("acl");
    take_and_release(&lock, &n, LONG).await;
    let wrong = url.replacen("redis://", &format!("redis://{user}:not-the-pw@"), 1);
    let e = RedisLock::connect(&wrong).await.unwrap_err();
    assert!(matches!(e, LockError::Config(_)), "{e:?}");
    assert!(!format!("{e} {e:?}").contains("not-the-pw"), "{e:?}");
    let _: () = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .query_async(&mut admin)
        .await
        .unwrap();
}

/// An acquire whose first attempt commits on the server after the client gave up on
/// its reply takes that grant again on its next attempt (same owner id) instead of
/// waiting a whole TTL behind itself.
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_is_taken_again_by_its_own_acquire() {
    let url = common::redis_url();
    let timeout = Duration::from_millis(300);
    dlock_conformance::late_grant_is_taken_again(&url, timeout, |url, timeout| async move {
        RedisLock::builder(&url)
            .timeout(timeout)
            .connect()
            .await
            .unwrap()
    })
    .await;
}

/// A Redlock acquire dropped while its round is in flight leaves nothing held: with
/// nobody left to take the lease, what the round won is released on every node.
#[cfg(feature = "server-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_redlock_acquire_leaves_nothing_held() {
    let urls = common::redlock_urls();
    let (proxied, group) = common::proxied(&urls).await;
    let lock = common::redlock(&proxied).await;
    let warm = name("redlock-dropped-warm");
    take_and_release(&lock, &warm, LONG).await;
    let n = name("redlock-dropped");
    group.set_mode(FaultMode::Delay(Duration::from_millis(200)));
    let cut_short =
        tokio::time::timeout(Duration::from_millis(50), lock.try_acquire(&n, LONG)).await;
    assert!(cut_short.is_err(), "dropped while its round was in flight");
    group.set_mode(FaultMode::Pass);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let observer = common::redlock(&urls).await;
    assert!(
        observer.inspect(&n).await.unwrap().is_none(),
        "a dropped acquire left {n} held until its TTL"
    );
    take_and_release(&observer, &n, LONG).await;
}

/// Redlock's restart delay reads each node's uptime with `INFO`. A user whose ACL
/// denies it gets a configuration error that says what to allow — at once, not after
/// a wait — and no grant (the old script errored with NOPERM on every acquisition).
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn redlock_nodes_that_deny_info_refuse_with_a_config_error() {
    let user = format!("dlock-test-noinfo-{:016x}", random_u64());
    let mut urls = Vec::new();
    for url in common::redlock_urls() {
        acl(
            &url,
            &["SETUSER", &user, "on", ">pw", "~*", "&*", "+@all", "-info"],
        )
        .await;
        urls.push(url.replacen("redis://", &format!("redis://{user}:pw@"), 1));
    }
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let lock = Redlock::builder(&urls)
        .timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let n = name("noinfo");
    let started = Instant::now();
    let r = lock.acquire(&n, Duration::from_secs(5), LONG).await;
    assert!(
        matches!(&r, Err(LockError::Config(m)) if m.contains("+info") && m.contains("restart-delay=0s")),
        "{r:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not a wait");
    assert_eq!(lock.inspect(&n).await.unwrap(), None, "nothing granted");
    for url in common::redlock_urls() {
        acl(&url, &["DELUSER", &user]).await;
    }
}

/// `ACL args…` on the server at `url`, as its default user.
async fn acl(url: &str, args: &[&str]) {
    let mut admin = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(args)
        .query_async(&mut admin)
        .await
        .unwrap();
}

/// A renewal sets the lease's TTL as an acquisition does, so it keeps within the
/// restart delay too: a `release_after` lingering past it is refused (it was taken, and
/// a node restarted empty could then grant the name while the linger ran).
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn redlock_renewals_keep_within_the_restart_delay() {
    let rest = Duration::from_secs(3);
    let urls = common::redlock_urls();
    let lock = common::redlock_resting(&urls, rest).await;
    // declared, so callers with a default of their own (dlock acquire) can keep within it
    assert_eq!(lock.capabilities().max_ttl, Some(rest));
    let n = name("linger");
    let r = lock.try_acquire(&n, rest + Duration::from_secs(1)).await;
    assert!(matches!(&r, Err(LockError::InvalidArgument(_))), "{r:?}");
    // the shared nodes may have been restarted by another test a moment ago: they rest
    let lease = take_once_back(&lock, &n, rest, Duration::from_secs(15), "no lease").await;
    let r = lock.release_after(&lease, Duration::from_secs(10)).await;
    assert!(
        matches!(&r, Err(LockError::InvalidArgument(m)) if m.contains("restart delay")),
        "{r:?}"
    );
    assert!(lock.release(&lease).await.unwrap(), "still held, released");
}

/// A proclaim whose answer from one node holding the lease never comes is no proof the
/// leadership is gone: held on three of five nodes (a bare quorum), two answering that
/// they do not hold it and one silent, the proclaim is an outage to retry, not
/// `LeaseLost` — and once the silent node answers again, it succeeds.
#[cfg(feature = "server-tests")]
#[tokio::test]
async fn redlock_proclaim_with_a_holder_silent_is_no_lost_lease() {
    use dlock_conformance::FaultMode;
    let (urls, proxies) = common::proxied(&common::redlock_urls()).await;
    let lock = common::redlock(&urls).await;
    let n = name("proclaim-silent");
    // nodes 4 and 5 cut off while the lock is taken: it is held on 1, 2 and 3
    proxies.0[3].set_mode(FaultMode::Blackhole);
    proxies.0[4].set_mode(FaultMode::Blackhole);
    let lease = lock
        .try_acquire(&n, Duration::from_secs(30))
        .await
        .unwrap()
        .expect("held on a quorum");
    proxies.0[3].set_mode(FaultMode::Pass);
    proxies.0[4].set_mode(FaultMode::Pass);
    proxies.0[2].set_mode(FaultMode::Blackhole);
    let value = dlock_core::HolderValue::new("10.0.0.7:9092").unwrap();
    match lock.proclaim(&lease, &value).await {
        Err(LockError::LeaseLost { .. }) => panic!("the lease is intact on three nodes"),
        Err(_) => {}
        Ok(()) => panic!("only two nodes took the value"),
    }
    proxies.0[2].set_mode(FaultMode::Pass);
    lock.proclaim(&lease, &value)
        .await
        .expect("all three answer");
    let held = lock.inspect(&n).await.unwrap().expect("held");
    assert_eq!(held.proclaimed, Some(value));
    assert!(lock.release(&lease).await.unwrap());
}
