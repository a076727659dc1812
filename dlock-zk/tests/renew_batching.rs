//! Renewals of many locks are batched: one `sync` + multi-read per renewal tick, not
//! one request per lock. Alone in its test binary, so no other test's requests are counted.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{batching, take};
use dlock_core::DistributedLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Packets the (first) server has received so far, from its `mntr` report.
async fn packets_received(addr: String) -> u64 {
    let host = addr.split(',').next().unwrap().to_owned();
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
    let packets = || packets_received(addr.clone());

    // the mntr connection itself counts as a packet or two, and the session pings
    let used =
        batching::concurrent_renewals(Arc::clone(&lock), 200, Duration::from_secs(20), packets)
            .await;
    assert!(used <= 12, "201 concurrent renewals took {used} packets");

    // A ZooKeeper lease lives as long as the session; a renewal confirmed through the
    // leader keeps it trusted for 3/5 of the session timeout (the lease's TTL), and
    // costs two packets (sync + multi-read) per grid step in which guards come due.
    let hold = Duration::from_secs(4);
    let probe = dlock_core::LockName::new("batching/probe").unwrap();
    let lease = take(&lock, &probe, common::SESSION).await;
    let ttl = lease.ttl();
    assert!(lock.release(&lease).await.unwrap());
    let unbatched = batching::unbatched(200, ttl, hold);
    let used = batching::renewing_guards(lock, 200, ttl, hold, packets).await;
    assert!(
        used <= unbatched / 16,
        "200 guards over 4 s cost {used} packets (unbatched: ~{unbatched})"
    );
}
