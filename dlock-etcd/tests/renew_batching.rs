//! Renewals of many locks cost a few requests per tick, not one per lock: locks with
//! one TTL share a lease, and the renewals due together ride on one keep-alive. Alone in
//! its test binary, so no other test's requests are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, GuardState, LockName, Locker, random_u64};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// gRPC request messages the member has received so far (all methods), from its
/// Prometheus endpoint on the client port.
async fn messages_received(endpoint: &str) -> u64 {
    let host = endpoint.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let total: f64 = out
        .lines()
        .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(total > 0.0, "no grpc_server_msg_received_total in /metrics");
    total as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_of_many_locks_cost_a_few_requests_per_tick() {
    let endpoints = common::single();
    let lock: Arc<dyn DistributedLock> = Arc::new(common::etcd(&endpoints).await);
    let prefix = format!("etcd/batch/{:016x}", random_u64());
    let ttl = Duration::from_secs(2);

    // 300 leases renewed all at once, and one stale one.
    let mut leases = Vec::new();
    for i in 0..300 {
        let n = LockName::new(&format!("{prefix}/{i}")).unwrap();
        leases.push(lock.try_acquire(&n, ttl).await.unwrap().unwrap());
    }
    let stale = leases.pop().unwrap();
    assert!(lock.release(&stale).await.unwrap());
    let before = messages_received(&endpoints[0]).await;
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases.clone() {
        let lock = Arc::clone(&lock);
        tasks.spawn(async move { lock.renew(&lease).await });
    }
    while let Some(r) = tasks.join_next().await {
        assert!(r.unwrap().unwrap().is_valid());
    }
    assert!(lock.renew(&stale).await.is_err());
    let sent = messages_received(&endpoints[0]).await - before;
    assert!(sent <= 6, "299 concurrent renewals took {sent} requests");
    for l in &leases {
        assert!(lock.release(l).await.unwrap(), "renewed lease still held");
    }

    // 200 guards over 4 TTLs renew about 12 times each (some 2 400 renewals).
    let locker = Locker::new(Arc::clone(&lock)).with_ttl(ttl);
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(locker.lock(format!("{prefix}/guard/{i}")).await.unwrap());
    }
    let before = messages_received(&endpoints[0]).await;
    tokio::time::sleep(ttl * 4).await;
    let sent = messages_received(&endpoints[0]).await - before;
    for g in &guards {
        assert_eq!(g.state(), GuardState::Held);
        assert!(g.is_held());
    }
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    assert!(
        sent <= 80,
        "200 guards over 4 TTLs cost {sent} requests (one per renewal: ~2 400)"
    );
}
