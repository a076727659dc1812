//! Harness for ZkLock: every client behind its own fault proxy, so a crash is a real
//! crash (the session is not closed; the server expires it).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FaultMode, Harness, Link, ProxyGroup, TestClient, Timings, required_env};
use dlock_core::async_trait;
use dlock_zk::{NodeLayout, ZkLock};

/// The test clients' session. Short, so crash cases are quick, but not shorter: the
/// client gives a connection up after 2/5 of it without a reply (800 ms here), and a
/// loaded two-core CI machine stalls a reply past 400 ms now and then.
pub const SESSION: Duration = Duration::from_millis(2000);

pub fn single() -> String {
    required_env("DLOCK_TEST_ZK_ADDR")
}

pub fn ensemble() -> String {
    required_env("DLOCK_TEST_ZK_CLUSTER_ADDR")
}

pub async fn zk(addr: &str) -> ZkLock {
    zk_with(addr, NodeLayout::Dlock).await
}

/// A client of `addr` on a session of `session`, each request bounded by `timeout`.
pub async fn zk_timed(addr: &str, session: Duration, timeout: Duration) -> ZkLock {
    ZkLock::builder(addr)
        .session_timeout(session)
        .timeout(timeout)
        .connect()
        .await
        .unwrap()
}

pub async fn zk_with(addr: &str, layout: NodeLayout) -> ZkLock {
    ZkLock::builder(addr)
        .layout(layout)
        .session_timeout(SESSION)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap()
}

/// Every server of `addr` behind its own proxy; returns the proxied address.
pub async fn proxied(addr: &str) -> (String, ProxyGroup) {
    let hosts: Vec<&str> = addr.split(',').collect();
    let (addrs, group) = ProxyGroup::start(&hosts).await;
    (addrs.join(","), group)
}

/// A server's (or an ensemble's) address, and the layout of the mutex's nodes.
pub struct Zk(pub String, pub NodeLayout);

#[async_trait]
impl Harness for Zk {
    async fn client(&self) -> TestClient {
        let (addr, proxies) = proxied(&self.0).await;
        let lock = zk_with(&addr, self.1).await;
        // a crashed process sends nothing more: its session expires on the server
        TestClient::with_crash_hook(
            Arc::new(lock),
            Box::new(move || proxies.set_mode(FaultMode::Blackhole)),
        )
    }
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let (addr, proxies) = proxied(&self.0).await;
        TestClient::behind(proxies, Arc::new(zk_with(&addr, self.1).await))
    }
    /// A short session; sessions expire on tick boundaries (200 ms here) after the
    /// timeout.
    fn timings(&self) -> Timings {
        Timings::millis(0, 1000, 20).with_short_ttl(SESSION)
    }
}
