//! The ZooKeeper ensemble's leader killed under a held lock and queued waiters. One
//! test in this binary, so nothing else runs against the ensemble meanwhile.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FencedCounter, services_ctl, take};
use dlock_core::{DistributedLock, LockName, random_u64};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep};

/// Which server (zk-c1..c3, in address order) leads, asked with the `srvr` command.
async fn leader(addr: &str) -> usize {
    for (i, h) in addr.split(',').enumerate() {
        if let Ok(mut s) = tokio::net::TcpStream::connect(h).await {
            s.write_all(b"srvr").await.unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out).await;
            if out.contains("Mode: leader") {
                return i;
            }
        }
    }
    panic!("no leader in {addr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_while_held_and_waiters_queue() {
    let addr = common::ensemble();
    let n = LockName::new(&format!("ensemble-{:016x}", random_u64())).unwrap();
    let counter = Arc::new(FencedCounter::default());
    let holder = common::zk(&addr).await;
    let held = take(&holder, &n, Duration::from_secs(30)).await;
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let c = common::zk(&addr).await;
        let (n, counter) = (n.clone(), Arc::clone(&counter));
        waiters.push(tokio::spawn(async move {
            let end = Instant::now() + Duration::from_secs(30);
            loop {
                // a waiter whose session moved keeps its place; one whose session
                // ended gets an error and queues again
                match c
                    .acquire(&n, Duration::from_secs(30), Duration::from_secs(20))
                    .await
                {
                    Ok(l) => {
                        counter.enter();
                        let v = counter.value();
                        sleep(Duration::from_millis(5)).await;
                        assert!(counter.write(l.token(), v + 1));
                        counter.leave();
                        let _ = c.release(&l).await;
                        return;
                    }
                    Err(e) => assert!(Instant::now() < end, "waiter never got the lock: {e}"),
                }
            }
        }));
    }
    sleep(Duration::from_millis(300)).await;
    let l = leader(&addr).await;
    let name = ["zk-c1", "zk-c2", "zk-c3"][l];
    services_ctl("kill", &[name]).await;
    // the holder either keeps the lock (its session moved to a survivor) or loses it;
    // while it believes it holds, nobody else may be inside
    let end = Instant::now() + Duration::from_secs(3);
    let mut holder_kept = false;
    while Instant::now() < end {
        match holder.renew(&held).await {
            Ok(_) => {
                holder_kept = true;
                counter.enter();
                sleep(Duration::from_millis(5)).await;
                counter.leave();
            }
            Err(dlock_core::LockError::LeaseLost { .. }) => {
                holder_kept = false;
                break;
            }
            Err(_) => {} // disconnected for now: suspect, retry
        }
        sleep(Duration::from_millis(100)).await;
    }
    let _ = holder.release(&held).await;
    for w in waiters {
        w.await.unwrap();
    }
    services_ctl("start", &[name]).await;
    assert_eq!(
        counter.overlaps(),
        0,
        "two holders at once (holder kept its lock: {holder_kept})"
    );
    assert_eq!(counter.rejected(), 0, "a token went backwards");
    assert_eq!(
        counter.value(),
        3,
        "every waiter got the lock after the election"
    );
}
