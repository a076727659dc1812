//! Renewals of many locks cost a few requests per tick, not one per lock: locks with
//! one TTL share a lease, and the renewals due together ride on one keep-alive. Alone in
//! its test binary, so no other test's requests are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::batching;
use dlock_core::DistributedLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// gRPC request messages the member has received so far (all methods), from its
/// Prometheus endpoint on the client port.
async fn messages_received(endpoint: String) -> u64 {
    let host = endpoint.trim_start_matches("http://").to_owned();
    let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
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
    let messages = || messages_received(endpoints[0].clone());

    let ttl = Duration::from_secs(2);
    let used = batching::concurrent_renewals(Arc::clone(&lock), 300, ttl, messages).await;
    assert!(used <= 6, "301 concurrent renewals took {used} requests");

    let hold = ttl * 4;
    let used = batching::renewing_guards(lock, 200, ttl, hold, messages).await;
    assert!(
        used <= 80,
        "200 guards over 4 TTLs cost {used} requests (one per renewal: ~{})",
        batching::unbatched(200, ttl, hold)
    );
}
