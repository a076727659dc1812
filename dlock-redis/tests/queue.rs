//! The server-side queue of one Redis server (`queue.rs`): what the conformance suite's
//! FIFO and one-wake-up cases do not show — dead waiters skipped, a free lock that goes
//! to the queue's head and not to whoever asks, a waiter that gives up leaving, and
//! readers admitted together behind a writer.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{redis, redis_url};
use dlock_conformance::take;
use dlock_core::{DistributedLock, DistributedRwLock, Lease, LockName, random_u64};
use redis::AsyncCommands;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

const LONG: Duration = Duration::from_secs(30);

fn name(case: &str) -> LockName {
    LockName::new(&format!("queue/{case}/{:016x}", random_u64())).unwrap()
}

async fn raw() -> redis::aio::MultiplexedConnection {
    common::raw(&redis_url()).await
}

/// The queue and waiters keys of `name` in the default layout (the names here need
/// no escaping).
fn queue_keys(name: &LockName) -> (String, String) {
    let tag = name.as_str();
    (
        format!("dlock:{{{tag}}}:queue"),
        format!("dlock:{{{tag}}}:waiters"),
    )
}

/// Queues `owner` by hand, as a waiter's attempt would: its deadline a minute ahead of
/// the server clock, a 30 s TTL, and whether it said it listens on its channel.
async fn queue_by_hand(name: &LockName, owner: &str, listens: bool) {
    let (queue, waiters) = queue_keys(name);
    let mut c = raw().await;
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
    let entry = format!("{} 30000 x 0 {}", secs * 1000 + 60_000, u8::from(listens));
    let _: () = c.hset(&waiters, owner, entry).await.unwrap();
    let _: () = c.rpush(&queue, owner).await.unwrap();
    let _: () = c.pexpire(&queue, 60_000).await.unwrap();
    let _: () = c.pexpire(&waiters, 60_000).await.unwrap();
}

/// An owner id as dlock makes them (`inspect` reports a token only for those).
fn owner_id() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

async fn queued(name: &LockName) -> usize {
    let (queue, _) = queue_keys(name);
    raw().await.llen(&queue).await.unwrap()
}

fn waiter(lock: &Arc<dyn DistributedLock>, name: &LockName, wait: Duration) -> JoinHandle<Lease> {
    let (lock, name) = (Arc::clone(lock), name.clone());
    tokio::spawn(async move {
        lock.acquire(&name, LONG, wait)
            .await
            .expect("waiter acquires")
    })
}

async fn client() -> Arc<dyn DistributedLock> {
    Arc::new(redis(&redis_url()).await)
}

/// A waiter killed while queued has no subscriber left on its channel: the release
/// passes over it at once, where its deadline (15 s) and the TTL a grant to it would
/// have (30 s) are far off.
#[tokio::test]
async fn a_killed_waiter_is_passed_over_at_once() {
    let n = name("killed");
    let (holder, next) = (client().await, client().await);
    let held = take(&holder, &n, LONG).await;
    queue_by_hand(&n, &owner_id(), true).await;
    let w = waiter(&next, &n, Duration::from_secs(20));
    sleep(Duration::from_millis(300)).await;
    assert_eq!(queued(&n).await, 2, "the dead waiter, then the live one");
    assert!(holder.release(&held).await.unwrap());
    let lease = timeout(Duration::from_secs(5), w)
        .await
        .expect("the live waiter gets the lock at once")
        .unwrap();
    assert!(lease.token() > held.token());
    assert_eq!(queued(&n).await, 0);
    assert!(next.release(&lease).await.unwrap());
}

/// A lock found free while someone queues goes to the queue's head: a `try_acquire`
/// does not take it past them, and its attempt hands it to the head.
#[tokio::test]
async fn a_free_lock_goes_to_the_head_not_to_whoever_asks() {
    let n = name("head");
    let lock = client().await;
    let before = take(&lock, &n, LONG).await;
    assert!(lock.release(&before).await.unwrap());
    let head = owner_id();
    queue_by_hand(&n, &head, false).await;
    assert!(
        lock.try_acquire(&n, LONG).await.unwrap().is_none(),
        "a try passed the queue"
    );
    let holder = lock
        .inspect(&n)
        .await
        .unwrap()
        .expect("granted to the head");
    assert_eq!(holder.owner.as_str(), head);
    assert!(holder.token > before.token(), "a grant raises the token");
    assert!(
        holder.remaining > Duration::from_secs(25),
        "with the head's TTL"
    );
    assert_eq!(queued(&n).await, 0);
    let (lock_key, _) = queue_keys(&n);
    let lock_key = lock_key.replace(":queue", ":lock");
    let _: () = raw().await.del(lock_key).await.unwrap();
}

/// A waiter that stops waiting leaves the queue — its wait ran out after it listened,
/// or before it did (a wait shorter than a round trip: it never subscribed), or its
/// future was dropped — so the next release grants the one behind it instead of a
/// waiter that is gone.
#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_queue() {
    for quit in ["times out listening", "times out at once", "is dropped"] {
        let n = name("gives-up");
        let (holder, quitter, next) = (client().await, client().await, client().await);
        let held = take(&holder, &n, LONG).await;
        let wait = if quit == "times out at once" {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(400)
        };
        if quit == "is dropped" {
            let waiting = quitter.acquire(&n, LONG, Duration::from_secs(20));
            assert!(timeout(Duration::from_millis(300), waiting).await.is_err());
        } else {
            let gave_up = quitter.acquire(&n, LONG, wait).await;
            assert!(gave_up.is_err(), "{quit}: held, the wait runs out");
        }
        let left = async {
            while queued(&n).await > 0 {
                sleep(Duration::from_millis(20)).await;
            }
        };
        timeout(Duration::from_secs(5), left)
            .await
            .unwrap_or_else(|_| panic!("the waiter that {quit} left the queue"));
        let w = waiter(&next, &n, Duration::from_secs(20));
        sleep(Duration::from_millis(200)).await;
        assert!(holder.release(&held).await.unwrap());
        let lease = timeout(Duration::from_secs(5), w)
            .await
            .unwrap_or_else(|_| panic!("{quit}: the next waiter is granted"))
            .unwrap();
        assert!(next.release(&lease).await.unwrap());
    }
}

/// In the plain layout `x` and `{x}` share their companion keys (`{x}:…`): a release of
/// one must not hand its key to a waiter of the other, who would then believe it holds
/// a lock someone else holds. Waiters do not queue in that layout.
#[tokio::test]
async fn plain_names_that_share_companion_keys_do_not_share_a_queue() {
    let plain = || async {
        Arc::new(
            dlock_redis::RedisLock::builder(&redis_url())
                .prefix("")
                .layout(dlock_redis::KeyLayout::Plain)
                .connect()
                .await
                .unwrap(),
        ) as Arc<dyn DistributedLock>
    };
    let id = format!("queue-plain-{:016x}", random_u64());
    let (bare, tagged) = (
        LockName::new(&id).unwrap(),
        LockName::new(&format!("{{{id}}}")).unwrap(),
    );
    let (a, c, d) = (plain().await, plain().await, plain().await);
    let held_tagged = take(&c, &tagged, LONG).await;
    let held_bare = take(&a, &bare, LONG).await;
    let w = waiter(&d, &tagged, Duration::from_secs(3));
    sleep(Duration::from_millis(300)).await;
    assert!(a.release(&held_bare).await.unwrap());
    sleep(Duration::from_millis(500)).await;
    assert!(!w.is_finished(), "a release of {bare} granted {tagged}");
    let holder = c.inspect(&tagged).await.unwrap().expect("still held");
    assert_eq!(holder.owner, *held_tagged.owner());
    assert!(c.release(&held_tagged).await.unwrap());
    let lease = timeout(Duration::from_secs(5), w).await.unwrap().unwrap();
    assert!(d.release(&lease).await.unwrap());
}

/// Readers queued behind a writer wait for it (writers do not starve), readers queued
/// together are admitted together, and a reader that came after a waiting writer is
/// admitted only after that writer.
#[tokio::test]
async fn readers_and_writers_are_admitted_in_order() {
    let n = name("rw");
    let c = client().await;
    let first = c.try_write(&n, LONG).await.unwrap().unwrap();
    let read = |tag: &'static str| {
        let (c, n) = (Arc::clone(&c), n.clone());
        tokio::spawn(async move {
            let l = c.read(&n, LONG, Duration::from_secs(20)).await.expect(tag);
            (tag, l)
        })
    };
    let (r1, r2) = (read("r1"), read("r2"));
    sleep(Duration::from_millis(200)).await;
    let w2 = {
        let (c, n) = (Arc::clone(&c), n.clone());
        tokio::spawn(async move {
            c.write(&n, LONG, Duration::from_secs(20))
                .await
                .expect("w2")
        })
    };
    sleep(Duration::from_millis(200)).await;
    let r3 = read("r3");
    sleep(Duration::from_millis(200)).await;
    assert!(c.release(&first).await.unwrap());
    let (_, l1) = timeout(Duration::from_secs(5), r1)
        .await
        .expect("r1")
        .unwrap();
    let (_, l2) = timeout(Duration::from_secs(5), r2)
        .await
        .expect("r2")
        .unwrap();
    sleep(Duration::from_millis(300)).await;
    assert!(!w2.is_finished(), "the writer waits for the readers");
    assert!(!r3.is_finished(), "a reader behind a waiting writer waits");
    assert!(c.release(&l1).await.unwrap());
    assert!(c.release(&l2).await.unwrap());
    let lw = timeout(Duration::from_secs(5), w2)
        .await
        .expect("w2")
        .unwrap();
    sleep(Duration::from_millis(300)).await;
    assert!(!r3.is_finished(), "the last reader waits for the writer");
    assert!(c.release(&lw).await.unwrap());
    let (_, l3) = timeout(Duration::from_secs(5), r3)
        .await
        .expect("r3")
        .unwrap();
    assert!(l3.token() > lw.token() && lw.token() > l2.token().max(l1.token()));
    assert!(c.release(&l3).await.unwrap());
}
