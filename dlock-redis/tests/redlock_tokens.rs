//! Redlock's token as a reader sees it: `inspect` (and so an election's observer)
//! must never report a token the holder was not given.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{DistributedLock, LockName};

async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
    s * 1_000_000 + us
}

/// Nodes whose fencing counters stand ahead of the others (as a loser's undone grants
/// leave them) must not make the holder's token change after its grants are visible.
/// Fails on the round that settled such counters with a second round: between the two,
/// a reader saw the holder on a quorum at the lower token it was then raised past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_sees_the_token_the_holder_was_given() {
    let urls = common::redlock_urls();
    let lock = Arc::new(common::redlock(&urls).await);
    let mut nodes = Vec::new();
    for u in &urls {
        let c = redis::Client::open(u.as_str()).unwrap();
        nodes.push(c.get_multiplexed_async_connection().await.unwrap());
    }
    let name = LockName::new(&format!("reader-token-{:016x}", dlock_core::random_u64())).unwrap();
    let fence = format!("dlock:{{{}}}:fence", name.as_str());

    let mut mismatches = Vec::new();
    for round in 0..60_u64 {
        // a minority-plus-one of nodes ahead, each by a different amount: their grants
        // would answer tokens above the proposal, and above each other
        let now = server_micros(&mut nodes[0]).await;
        for (i, node) in nodes.iter_mut().enumerate().skip(urls.len() / 2) {
            let ahead = now + 5_000_000 + round * 100_000 + i as u64;
            let _: () = redis::cmd("SET")
                .arg(&fence)
                .arg(ahead)
                .query_async(node)
                .await
                .unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lock, name, stop) = (Arc::clone(&lock), name.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(Some(info)) = lock.inspect(&name).await {
                        seen.push((info.owner, info.token));
                    }
                }
                seen
            })
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
        let lease = lock
            .acquire(&name, Duration::from_secs(10), Duration::from_secs(5))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        stop.store(true, Ordering::Relaxed);
        let seen = reader.await.unwrap();
        mismatches.extend(
            seen.into_iter()
                .filter(|(owner, token)| owner == lease.owner() && *token != lease.token())
                .map(|(_, token)| (round, lease.token(), token)),
        );
        assert!(lock.release(&lease).await.unwrap());
    }
    assert!(
        mismatches.is_empty(),
        "(round, the holder's token, the token a reader saw for it): {mismatches:?}"
    );
}
