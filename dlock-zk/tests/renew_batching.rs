//! Renewals of many locks are batched: one multi-read per renewal tick, not one
//! request per lock. Alone in its test binary, so no other test's requests are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, GuardState, LockError, LockName, Locker, random_u64};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Packets the (first) server has received so far, from its `mntr` report.
async fn packets_received(addr: &str) -> u64 {
    let host = addr.split(',').next().unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(b"mntr").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
        .expect("mntr reports zk_packets_received (4lw.commands.whitelist)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_due_together_share_one_request() {
    let addr = common::single();
    let lock: Arc<dyn DistributedLock> = Arc::new(common::zk(&addr).await);
    let prefix = format!("zk/batch/{:016x}", random_u64());
    let ttl = Duration::from_secs(20);

    // 200 held leases and one stale one, renewed all at once.
    let mut leases = Vec::new();
    for i in 0..200 {
        let n = LockName::new(&format!("{prefix}/{i}")).unwrap();
        leases.push(lock.try_acquire(&n, ttl).await.unwrap().unwrap());
    }
    let stale_name = LockName::new(&format!("{prefix}/stale")).unwrap();
    let stale = lock.try_acquire(&stale_name, ttl).await.unwrap().unwrap();
    assert!(lock.release(&stale).await.unwrap());

    let before = packets_received(&addr).await;
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases.iter().cloned().chain([stale.clone()]) {
        let lock = Arc::clone(&lock);
        tasks.spawn(async move { (lease.name().clone(), lock.renew(&lease).await) });
    }
    let mut renewed = 0;
    while let Some(r) = tasks.join_next().await {
        let (name, outcome) = r.unwrap();
        if name == stale_name {
            assert!(
                matches!(outcome, Err(LockError::LeaseLost { .. })),
                "{outcome:?}"
            );
        } else {
            assert!(outcome.unwrap().is_valid());
            renewed += 1;
        }
    }
    // the mntr connection itself counts as a packet or two, and the session pings
    let packets = packets_received(&addr).await - before;
    assert_eq!(renewed, 200);
    assert!(
        packets <= 12,
        "201 concurrent renewals took {packets} packets"
    );
    for l in &leases {
        assert!(lock.release(l).await.unwrap(), "renewed lease still held");
    }

    // Guards renew on a shared grid: 200 guards over 4 s renew about every third of the
    // 1 s session timeout (some 2 400 renewals) in a few dozen requests.
    let locker = Locker::new(Arc::clone(&lock)).with_ttl(common::SESSION);
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(locker.lock(format!("{prefix}/guard/{i}")).await.unwrap());
    }
    let before = packets_received(&addr).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let packets = packets_received(&addr).await - before;
    for g in &guards {
        assert_eq!(g.state(), GuardState::Held);
        assert!(g.is_held());
    }
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    assert!(
        packets <= 120,
        "200 guards over 4 s cost {packets} packets (unbatched: ~2 400)"
    );
}
