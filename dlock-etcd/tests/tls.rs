//! `https://` endpoints against a TLS-only etcd started for this test, with a private CA.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_conformance::{TestCerts, TestServer, free_port, take_and_release};
use dlock_core::LockName;
use dlock_etcd::EtcdLock;

#[tokio::test]
async fn https_endpoints_with_a_private_ca() {
    let (dir, certs) = TestCerts::in_scratch("dlock-etcd-tls");
    let p = |x: &std::path::Path| x.display().to_string();
    let peer = free_port();
    let server = TestServer::start(
        "etcd",
        &[
            "--name",
            "tls",
            "--data-dir",
            &p(&dir.join("data")),
            "--unsafe-no-fsync",
            "--logger",
            "zap",
            "--log-outputs",
            "stderr",
            "--listen-client-urls",
            "https://127.0.0.1:{port}",
            "--advertise-client-urls",
            "https://127.0.0.1:{port}",
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
            "--initial-cluster",
            &format!("tls=http://127.0.0.1:{peer}"),
            "--cert-file",
            &p(&certs.cert),
            "--key-file",
            &p(&certs.key),
        ]
        .map(str::to_owned),
    );
    let endpoint = format!("https://127.0.0.1:{}", server.port);
    // the member may still be electing itself: give it a few seconds
    let mut lock = None;
    for _ in 0..50 {
        match EtcdLock::builder(&[&endpoint])
            .tls_ca_pem(&certs.ca_pem)
            .timeout(Duration::from_secs(2))
            .connect()
            .await
        {
            Ok(l) => {
                lock = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let lock = lock.expect("connect over TLS");
    let n = LockName::new("tls/etcd").unwrap();
    take_and_release(&lock, &n, Duration::from_secs(10)).await;
    let untrusted = EtcdLock::builder(&[&endpoint])
        .timeout(Duration::from_secs(1))
        .connect()
        .await;
    assert!(
        untrusted.is_err(),
        "a member with an unknown CA was trusted"
    );
}
