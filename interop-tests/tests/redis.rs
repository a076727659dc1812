//! dlock's Redis locks with `layout=plain` (and `prefix=` empty) and rslock — the
//! `SET key value NX PX` family that redsync, redis-py's `Lock` and node-redlock
//! belong to — on the same name: each keeps the other out, on one server and on
//! Redlock's five. (Their holders get no fencing token; there is no queue to share.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, Lease, LockName};
use dlock_conformance::{required_env, take};
use dlock_interop_tests::unique;
use redis::AsyncCommands;
use tokio::time::sleep;

const TTL: Duration = Duration::from_secs(10);

fn url() -> String {
    required_env("DLOCK_TEST_REDIS_URL")
}

/// A plain connection to the Redis server, to look at what the clients left there.
async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn redlock_urls() -> Vec<String> {
    required_env("DLOCK_TEST_REDLOCK_URLS")
        .split(',')
        .map(str::to_owned)
        .collect()
}

async fn dlock() -> Arc<dyn DistributedLock> {
    dlock_any::connect(&format!("{}?prefix=&layout=plain", url()))
        .await
        .unwrap()
}

/// rslock trying a few times, 50 ms apart.
fn rslock(urls: Vec<String>) -> rslock::LockManager {
    let mut m = rslock::LockManager::new(urls);
    m.set_retry(3, Duration::from_millis(50));
    m
}

/// rslock holds `name`: dlock cannot take it; rslock lets go: dlock takes it, and
/// rslock cannot. dlock's lease.
async fn each_keeps_the_other_out(
    lock: &dyn DistributedLock,
    theirs: &rslock::LockManager,
    name: &str,
) -> Lease {
    let n = LockName::new(name).unwrap();
    let held = theirs.lock(name.as_bytes(), TTL).await.unwrap();
    assert!(
        lock.try_acquire(&n, TTL).await.unwrap().is_none(),
        "rslock holds {name}"
    );
    theirs.unlock(&held).await;
    let ours = take(lock, &n, TTL).await;
    assert!(
        theirs.lock(name.as_bytes(), TTL).await.is_err(),
        "rslock got in while dlock held"
    );
    ours
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_keeps_the_other_out_on_one_server() {
    let lock = dlock().await;
    let theirs = rslock(vec![url()]);
    let name = unique("interop-redis");
    let ours = each_keeps_the_other_out(&*lock, &theirs, &name).await;
    // the key is the name itself, holding dlock's owner id
    let mut conn = raw().await;
    let value: String = conn.get(&name).await.unwrap();
    assert_eq!(value, ours.owner().as_str());
    assert!(lock.release(&ours).await.unwrap());
    let again = theirs.lock(name.as_bytes(), TTL).await.unwrap();
    theirs.unlock(&again).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_keeps_the_other_out_on_redlock() {
    let urls = redlock_urls();
    let hosts: Vec<String> = urls.iter().map(|u| u.replace("redis://", "")).collect();
    let lock = dlock_any::connect(&format!(
        // (shared test servers, started with the run: no restart delay)
        "redlock://{}?prefix=&layout=plain&restart-delay=0s",
        hosts.join(",")
    ))
    .await
    .unwrap();
    let theirs = rslock(urls);
    let name = unique("interop-redlock");
    let ours = each_keeps_the_other_out(&*lock, &theirs, &name).await;
    assert!(lock.release(&ours).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_incremented_by_both_loses_nothing() {
    let lock = dlock().await;
    let name = unique("interop-redis");
    let counter = unique("interop-redis-counter");
    let n = LockName::new(&name).unwrap();
    const ROUNDS: usize = 15;
    let turns = Arc::new(std::sync::Mutex::new(String::new()));
    // dlock goes first, so that the lock changes hands both ways
    let mut held = Some(
        lock.acquire(&n, TTL, Duration::from_secs(30))
            .await
            .unwrap(),
    );
    let theirs = {
        let (name, counter, turns) = (name.clone(), counter.clone(), Arc::clone(&turns));
        tokio::spawn(async move {
            // retrying every 5 ms: it gets in during dlock's 30 ms between rounds
            let mut m = rslock::LockManager::new(vec![url()]);
            m.set_retry(6000, Duration::from_millis(5));
            for _ in 0..ROUNDS {
                let l = m.lock(name.as_bytes(), TTL).await.unwrap();
                increment(&counter).await;
                turns.lock().unwrap().push('r');
                m.unlock(&l).await;
                sleep(Duration::from_millis(30)).await;
            }
        })
    };
    for _ in 0..ROUNDS {
        let l = match held.take() {
            Some(l) => l,
            None => lock
                .acquire(&n, TTL, Duration::from_secs(30))
                .await
                .unwrap(),
        };
        increment(&counter).await;
        turns.lock().unwrap().push('d');
        assert!(lock.release(&l).await.unwrap());
        // dlock's waiter looks again every 100 ms: rslock's 30 ms pauses let it in
        sleep(Duration::from_millis(30)).await;
    }
    theirs.await.unwrap();
    let mut conn = raw().await;
    let v: u64 = conn.get(&counter).await.unwrap();
    assert_eq!(v, (2 * ROUNDS) as u64);
    let turns = turns.lock().unwrap().clone();
    assert!(
        turns.contains("dr") && turns.contains("rd"),
        "the lock never changed hands both ways: {turns}"
    );
}

/// Read, pause, write back plus one — loses increments unless the lock excludes.
async fn increment(key: &str) {
    let mut conn = raw().await;
    let v: Option<u64> = conn.get(key).await.unwrap();
    sleep(Duration::from_millis(5)).await;
    let () = conn.set(key, v.unwrap_or(0) + 1).await.unwrap();
}
