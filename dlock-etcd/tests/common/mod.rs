//! Harness for EtcdLock, on one member or a cluster.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{Harness, Link, ProxyGroup, TestClient, Timings, required_env};
use dlock_core::async_trait;
use dlock_etcd::EtcdLock;

pub fn single() -> Vec<String> {
    endpoints("DLOCK_TEST_ETCD_ENDPOINTS")
}

pub fn cluster() -> Vec<String> {
    endpoints("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS")
}

fn endpoints(var: &str) -> Vec<String> {
    required_env(var).split(',').map(str::to_owned).collect()
}

pub async fn etcd(endpoints: &[String]) -> EtcdLock {
    let e: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    EtcdLock::builder(&e)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap()
}

/// Every endpoint behind its own proxy.
pub async fn proxied(endpoints: &[String]) -> (Vec<String>, ProxyGroup) {
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    let (addrs, group) = ProxyGroup::start(&hosts).await;
    (addrs.iter().map(|a| format!("http://{a}")).collect(), group)
}

pub struct Etcd(pub Vec<String>);

#[async_trait]
impl Harness for Etcd {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(etcd(&self.0).await))
    }
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let (endpoints, link) = proxied(&self.0).await;
        TestClient::behind(link, Arc::new(etcd(&endpoints).await))
    }
    /// The shortest lease these servers grant (1.5 × election timeout, rounded up);
    /// etcd's lessor looks for expired leases every 500 ms.
    fn timings(&self) -> Timings {
        Timings::millis(1000, 1000, 20)
    }
}
