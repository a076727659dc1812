//! `rediss://` against a TLS-only Redis started for this test, with a private CA.
#![cfg(all(feature = "tls", feature = "server-tests"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_conformance::{TestCerts, TestServer, take_and_release};
use dlock_core::LockName;
use dlock_redis::RedisLock;

#[tokio::test]
async fn rediss_with_a_private_ca() {
    let (dir, certs) = TestCerts::in_scratch("dlock-redis-tls");
    let server = TestServer::redis_tls(&dir, &certs, false);
    let url = format!("rediss://127.0.0.1:{}", server.port);
    let lock = RedisLock::builder(&url)
        .tls_ca_pem(&certs.ca_pem)
        .connect()
        .await
        .unwrap();
    let n = LockName::new("tls/redis").unwrap();
    take_and_release(&lock, &n, Duration::from_secs(10)).await;
    // without trusting the private CA the handshake must fail
    let untrusted = RedisLock::builder(&url)
        .timeout(Duration::from_secs(1))
        .connect()
        .await;
    assert!(
        untrusted.is_err(),
        "a server with an unknown CA was trusted"
    );
    // and plain redis:// cannot talk to a TLS-only port
    let plain = RedisLock::builder(&format!("redis://127.0.0.1:{}", server.port))
        .timeout(Duration::from_secs(1))
        .connect()
        .await;
    assert!(plain.is_err());
}
