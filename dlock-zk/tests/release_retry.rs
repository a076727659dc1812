//! A release whose delete is lost (the connection drops with the request in it) on a
//! session that lives on: the node would block the name for the life of the session,
//! so the client keeps deleting it in the background until it is gone.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_conformance::{FaultMode, unique_name};
use dlock_core::{DistributedLock, settle};

mod common;
use common::{proxied, single};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_release_is_retried_until_the_node_is_gone() {
    let (addr, proxies) = proxied(&single()).await;
    // a session far longer than the test: the node cannot just expire with it
    let holder = common::zk_timed(&addr, Duration::from_secs(30), Duration::from_millis(400)).await;
    let other = common::zk(&single()).await;
    let name = unique_name("release-retry");
    let lease = holder
        .acquire(&name, Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    // the delete is sent into a cut link and then dropped with the connection
    proxies.set_mode(FaultMode::Blackhole);
    assert!(
        holder.release(&lease).await.is_err(),
        "the release cannot be confirmed"
    );
    for p in &proxies.0 {
        p.reset();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxies.set_mode(FaultMode::Pass);
    // the client reconnects on its still-live session and deletes the node
    let next = other
        .acquire(&name, Duration::from_secs(5), Duration::from_secs(10))
        .await;
    assert!(
        next.is_ok(),
        "a released lock stayed held by a live session: {next:?}"
    );
    assert!(settle(Duration::from_secs(5)).await, "the retry ended");
}

/// A min-hold release of a lease already lost (its session expired behind a cut link)
/// has nothing to keep blocked: it answers at once, not after the whole delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_release_of_a_lost_lease_does_not_sleep() {
    let (addr, proxies) = proxied(&single()).await;
    let holder = common::zk(&addr).await;
    let name = unique_name("linger-lost");
    let lease = holder
        .acquire(&name, common::SESSION, Duration::ZERO)
        .await
        .unwrap();
    proxies.set_mode(FaultMode::Blackhole);
    for p in &proxies.0 {
        p.reset();
    }
    // the session expires on the server; the client's lease runs out with it
    tokio::time::sleep(common::SESSION * 4).await;
    proxies.set_mode(FaultMode::Pass);
    let started = std::time::Instant::now();
    let released = holder.release_after(&lease, Duration::from_secs(20)).await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "slept {:?} for a lost lease",
        started.elapsed()
    );
    assert!(!released.unwrap(), "nothing was ours to release");
}
