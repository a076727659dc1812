//! How a waiter waits on etcd: one watch per queue and client, kept across hand-offs,
//! and no second read of the queue when the watch has seen everything ahead go.
//! (A watch per wait opened a gRPC stream per hand-off and, on etcd before 3.6.2,
//! could start unsynced and stall the whole queue for etcd's 100 ms catch-up tick.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_core::{DistributedLock, LockName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The server's count of `method` requests (`grpc_server_started_total`).
async fn started(endpoint: &str, method: &str) -> u64 {
    count(endpoint, "grpc_server_started_total", method).await
}

/// The server's count of `method` messages received (`grpc_server_msg_received_total`):
/// for a stream such as `LeaseKeepAlive`, one per keep-alive.
async fn received(endpoint: &str, method: &str) -> u64 {
    count(endpoint, "grpc_server_msg_received_total", method).await
}

/// One of the server's per-method gRPC counters.
async fn count(endpoint: &str, counter: &str, method: &str) -> u64 {
    let host = endpoint.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let req = format!("GET /metrics HTTP/1.0\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    let series = format!("{counter}{{grpc_method=\"{method}\",grpc_service=\"etcdserverpb.");
    body.lines()
        .filter(|l| l.starts_with(&series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Two clients pass one lock back and forth, each waiting for the other every time.
/// Fails on the waiter that opened a watch per wait (40 streams for 40 hand-offs) and
/// read the queue three times per hand-off.
#[tokio::test]
async fn waiters_keep_one_watch_per_queue_and_read_once_per_turn() {
    let endpoints = common::single();
    let (a, b) = (
        common::etcd(&endpoints).await,
        common::etcd(&endpoints).await,
    );
    let name = LockName::new(&format!("queue-watch-{:016x}", dlock_core::random_u64())).unwrap();
    let ttl = Duration::from_secs(10);
    let hand_offs = 40_u64;

    let watches_before = started(&endpoints[0], "Watch").await;
    let reads_before = started(&endpoints[0], "Range").await;
    let keepalives_before = received(&endpoints[0], "LeaseKeepAlive").await;
    let mut held = a.acquire(&name, ttl, Duration::from_secs(5)).await.unwrap();
    let mut holder_is_a = true;
    for _ in 0..hand_offs {
        let (holder, waiter) = if holder_is_a { (&a, &b) } else { (&b, &a) };
        let wait = waiter.acquire(&name, ttl, Duration::from_secs(5));
        let release = async {
            // the waiter is queued and watching by now
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(holder.release(&held).await.unwrap());
        };
        let (next, ()) = tokio::join!(wait, release);
        let next = next.unwrap();
        assert!(next.token() > held.token(), "tokens increase");
        held = next;
        holder_is_a = !holder_is_a;
    }
    let holder = if holder_is_a { &a } else { &b };
    assert!(holder.release(&held).await.unwrap());

    let watches = started(&endpoints[0], "Watch").await - watches_before;
    let reads = started(&endpoints[0], "Range").await - reads_before;
    // each refresh of a client's shared lease reads the keys attached to it back once
    // (a Range of its own, however many hand-offs there are): on a slow machine the
    // run spans a refresh or two
    let refreshes = received(&endpoints[0], "LeaseKeepAlive").await - keepalives_before;
    assert!(
        watches <= 4,
        "{watches} watch streams for {hand_offs} hand-offs: one per client and queue expected"
    );
    // A waiter that a loaded machine let start after its holder had released reads
    // the queue once more (its watch began too late to see the delete): a few such
    // turns are timing, not the regression this guards against (three reads every
    // hand-off).
    assert!(
        reads <= hand_offs + hand_offs / 4 + refreshes,
        "{reads} reads for {hand_offs} hand-offs and {refreshes} lease refreshes: one read of the keys ahead per wait expected"
    );
}
