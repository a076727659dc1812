//! Harnesses for RedisLock and Redlock.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{
    Harness, Link, ProxyGroup, TestClient, Timings, required_env, url_host_port, url_with_host_port,
};
use dlock_core::async_trait;
use dlock_redis::{RedisLock, Redlock};

pub fn redis_url() -> String {
    required_env("DLOCK_TEST_REDIS_URL")
}

pub fn redlock_urls() -> Vec<String> {
    required_env("DLOCK_TEST_REDLOCK_URLS")
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// A plain connection to the server at `url`, to look at what the clients left there.
pub async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A Redis client of `url` as the trait object the backend-neutral steps take.
pub async fn redis_dyn(url: &str) -> Arc<dyn dlock_core::DistributedLock> {
    Arc::new(redis(url).await)
}

pub async fn redis(url: &str) -> RedisLock {
    RedisLock::builder(url)
        .timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap()
}

pub async fn redlock(urls: &[String]) -> Redlock {
    // The shared test servers start with the run and some tests restart them: no
    // restart delay for the clients of tests about something else (restart.rs checks
    // the delay with one of its own).
    redlock_resting(urls, Duration::ZERO).await
}

/// A Redlock client of `urls` that treats a node restarted within `rest` as resting.
pub async fn redlock_resting(urls: &[String], rest: Duration) -> Redlock {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    Redlock::builder(&urls)
        .timeout(Duration::from_millis(300))
        .restart_delay(rest)
        .connect()
        .await
        .unwrap()
}

/// Each URL routed through its own proxy.
pub async fn proxied(urls: &[String]) -> (Vec<String>, ProxyGroup) {
    let hosts: Vec<String> = urls.iter().map(|u| url_host_port(u).unwrap()).collect();
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let (addrs, group) = ProxyGroup::start(&hosts).await;
    let urls = urls
        .iter()
        .zip(&addrs)
        .map(|(u, a)| url_with_host_port(u, a))
        .collect();
    (urls, group)
}

pub struct Single(pub String);

#[async_trait]
impl Harness for Single {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(redis(&self.0).await))
    }
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let (urls, link) = proxied(std::slice::from_ref(&self.0)).await;
        TestClient::behind(link, Arc::new(redis(&urls[0]).await))
    }
    fn timings(&self) -> Timings {
        Timings::millis(500, 100, 50)
    }
}

pub struct Quorum(pub Vec<String>);

#[async_trait]
impl Harness for Quorum {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(redlock(&self.0).await))
    }
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let (urls, link) = proxied(&self.0).await;
        TestClient::behind(link, Arc::new(redlock(&urls).await))
    }
    fn timings(&self) -> Timings {
        Timings::millis(800, 100, 25)
    }
}

pub fn sentinel_url() -> String {
    required_env("DLOCK_TEST_REDIS_SENTINEL_URL")
}

pub fn cluster_url() -> String {
    required_env("DLOCK_TEST_REDIS_CLUSTER_URL")
}

/// RedisLock on the master Redis Sentinel names, or on a Redis Cluster. A
/// partitionable client is cut by a switch in front of it: the sentinels hand out the
/// master's own address and the cluster its nodes' (`CLUSTER SLOTS`), which no proxy in
/// front of the URL's hosts would cover (`sentinel_failover.rs` and `cluster_slots.rs`
/// fault the real servers instead).
pub struct Discovered(pub String);

#[async_trait]
impl Harness for Discovered {
    async fn client(&self) -> TestClient {
        TestClient::new(Arc::new(redis(&self.0).await))
    }
    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        dlock_conformance::switched_client(Arc::new(redis(&self.0).await))
    }
    fn timings(&self) -> Timings {
        Timings::millis(500, 100, 50)
    }
}
