//! dlock's ZooKeeper locks with `layout=curator` and the Curator-compatible recipe of
//! zookeeper-client (`LockPrefix::new_curator(dir, "lock-")`, the node layout of
//! Curator's `InterProcessMutex`: `_c_<id>-lock-<sequence>`) on the same path: one
//! queue, the lowest sequence holds, each waiter watching its predecessor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockName};
use dlock_conformance::{acquiring_timed, required_env, take, take_and_release};
use dlock_interop_tests::unique;
use dlock_zk::zookeeper_client as zk;
use dlock_zk::{NodeLayout, ZkLock};
use tokio::time::{Instant, sleep, timeout};

const TTL: Duration = Duration::from_secs(10);
const ROOT: &str = "/dlock-interop";

fn addr() -> String {
    required_env("DLOCK_TEST_ZK_ADDR")
}

async fn dlock() -> Arc<ZkLock> {
    let lock = ZkLock::builder(&addr())
        .root(ROOT)
        .layout(NodeLayout::Curator)
        .connect()
        .await
        .unwrap();
    Arc::new(lock)
}

/// A test's dlock client, ZooKeeper client, and fresh name (as a string and a lock
/// name).
async fn opening() -> (Arc<ZkLock>, zk::Client, String, LockName) {
    let name = unique("interop-zk");
    let n = LockName::new(&name).unwrap();
    (dlock().await, client().await, name, n)
}

async fn client() -> zk::Client {
    zk::Client::connect(&addr()).await.unwrap()
}

/// Curator's lock on `name` (the same node as dlock's: root + name), held until the
/// returned client is dropped.
async fn curator<'a>(client: &'a zk::Client, name: &str) -> zk::LockClient<'a> {
    let dir = format!("{ROOT}/{name}");
    let parents = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(parents)
        .unwrap();
    client
        .lock(
            zk::LockPrefix::new_curator(&dir, "lock-").unwrap(),
            b"",
            options,
        )
        .await
        .unwrap()
}

/// Lets Curator's lock go and waits until its node is gone.
async fn unlock(client: &zk::Client, held: zk::LockClient<'_>) {
    let path = held.lock_path().to_owned();
    client.delete(&path, None).await.unwrap();
    drop(held);
}

/// Waits until `n` contenders are queued on `name`.
async fn queued(client: &zk::Client, name: &str, n: usize) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok((children, _)) = client.get_children(&format!("{ROOT}/{name}")).await
            && children.len() >= n
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "{n} contenders never queued on {name}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_holder_keeps_dlock_out_and_dlocks_keeps_curator_out() {
    let (lock, c, name, n) = opening().await;
    let theirs = curator(&c, &name).await;
    assert!(
        lock.try_acquire(&n, TTL).await.unwrap().is_none(),
        "Curator holds {name}"
    );
    unlock(&c, theirs).await;
    let ours = lock
        .acquire(&n, TTL, Duration::from_secs(10))
        .await
        .unwrap();
    let waiting = {
        let name = name.clone();
        tokio::spawn(async move {
            let c2 = client().await;
            let held = curator(&c2, &name).await;
            let at = Instant::now();
            unlock(&c2, held).await;
            at
        })
    };
    queued(&c, &name, 2).await;
    sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "Curator got in while dlock held");
    let released = Instant::now();
    assert!(lock.release(&ours).await.unwrap());
    let at = timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(at >= released, "Curator got in before dlock released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_is_served_in_order() {
    let (lock, c, name, n) = opening().await;
    let first = take(&lock, &n, TTL).await;
    // Curator queues second, a dlock contender third
    let curator_side = {
        let name = name.clone();
        tokio::spawn(async move {
            let c = client().await;
            let held = curator(&c, &name).await;
            let got = Instant::now();
            sleep(Duration::from_millis(300)).await;
            let left = Instant::now();
            unlock(&c, held).await;
            (got, left)
        })
    };
    queued(&c, &name, 2).await;
    let dlock_side = acquiring_timed(&lock, &n, TTL, Duration::from_secs(20));
    queued(&c, &name, 3).await;
    let (children, _) = c.get_children(&format!("{ROOT}/{name}")).await.unwrap();
    assert_eq!(
        curators_order(&children),
        creation_order(&children),
        "Java Curator would misorder this queue: {children:?}"
    );
    let released = Instant::now();
    assert!(lock.release(&first).await.unwrap());
    let (curator_got, curator_left) = curator_side.await.unwrap();
    let (dlock_got, second) = dlock_side.await.unwrap();
    assert!(lock.release(&second).await.unwrap());
    assert!(
        curator_got >= released,
        "Curator got in before dlock's first let go"
    );
    assert!(
        dlock_got >= curator_left,
        "dlock's second jumped Curator in the queue"
    );
}

/// A root that Curator made as a container is deleted by the server with its last
/// child; a dlock client connected before must make it again, not fail for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_deleted_under_a_client_is_made_again() {
    let root = format!("/{}", unique("interop-zk-root"));
    let lock = ZkLock::builder(&addr())
        .root(&root)
        .layout(NodeLayout::Curator)
        .connect()
        .await
        .unwrap();
    let c = client().await;
    c.delete(&root, None).await.unwrap(); // as the server does to an empty container
    let n = LockName::new("orders").unwrap();
    take_and_release(&lock, &n, TTL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_incremented_by_both_loses_nothing() {
    let lock = dlock().await;
    let name = unique("interop-zk");
    let counter = format!("/{}", unique("interop-zk-counter"));
    let c = client().await;
    let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    c.create(&counter, b"0", &mode).await.unwrap();
    const ROUNDS: usize = 10;
    let ours = {
        let (lock, name, counter) = (Arc::clone(&lock), name.clone(), counter.clone());
        tokio::spawn(async move {
            let c = client().await;
            let n = LockName::new(&name).unwrap();
            for _ in 0..ROUNDS {
                let l = lock
                    .acquire(&n, TTL, Duration::from_secs(30))
                    .await
                    .unwrap();
                increment(&c, &counter).await;
                assert!(lock.release(&l).await.unwrap());
            }
        })
    };
    let theirs = {
        let (name, counter) = (name.clone(), counter.clone());
        tokio::spawn(async move {
            let c = client().await;
            for _ in 0..ROUNDS {
                let held = curator(&c, &name).await;
                increment(&c, &counter).await;
                unlock(&c, held).await;
            }
        })
    };
    ours.await.unwrap();
    theirs.await.unwrap();
    let (data, _) = c.get_data(&counter).await.unwrap();
    assert_eq!(String::from_utf8(data).unwrap(), (2 * ROUNDS).to_string());
}

/// The queue as Java Curator sorts it (`StandardLockInternalsDriver.fixForSorting`:
/// the text after the last `lock-`). zookeeper-client's recipe sorts by the sequence
/// digits alone, so it would accept dlock's default layout too; Curator would not.
fn curators_order(children: &[String]) -> Vec<String> {
    let mut sorted = children.to_vec();
    sorted.sort_by_key(|c| {
        c.rfind("lock-")
            .map_or(c.clone(), |i| c[i + 5..].to_owned())
    });
    sorted
}

/// The queue in creation order: ZooKeeper's 10-digit sequence at the end of each name.
fn creation_order(children: &[String]) -> Vec<String> {
    let mut sorted = children.to_vec();
    sorted.sort_by_key(|c| c[c.len() - 10..].parse::<i32>().unwrap());
    sorted
}

/// Read, pause, write back plus one — loses increments unless the lock excludes.
async fn increment(c: &zk::Client, path: &str) {
    let (data, _) = c.get_data(path).await.unwrap();
    let v: u64 = String::from_utf8(data).unwrap().parse().unwrap();
    sleep(Duration::from_millis(5)).await;
    c.set_data(path, (v + 1).to_string().as_bytes(), None)
        .await
        .unwrap();
}
