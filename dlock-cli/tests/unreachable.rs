//! A lock service that is down is named at once: exit 69 within two seconds, with the
//! database and the host and port it was looked for at (not a pool's "timed out" five
//! seconds later, nor a bare "timeout" after ten).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

mod common;
use common::dlock;

#[test]
fn unreachable_servers_are_named_at_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut urls = vec![
        ("PostgreSQL", format!("postgres://u:pw@127.0.0.1:{port}/x")),
        ("MySQL/MariaDB", format!("mysql://u:pw@127.0.0.1:{port}/x")),
        ("Redis", format!("redis://127.0.0.1:{port}")),
        ("ZooKeeper", format!("zk://127.0.0.1:{port}")),
    ];
    if cfg!(feature = "etcd") {
        urls.push(("etcd", format!("etcd://127.0.0.1:{port}")));
    }
    for (what, url) in urls {
        let t = Instant::now();
        // --url before the subcommand, as after it
        let out = dlock("sqlite:///unused")
            .args(["--url", &url, "status", "n"])
            .output()
            .unwrap();
        let took = t.elapsed();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{url}: {said}");
        assert!(took < Duration::from_secs(2), "{url}: took {took:?}");
        assert!(
            said.contains(&format!("cannot connect to {what} at 127.0.0.1:{port}")),
            "{url}: {said}"
        );
        assert!(!said.contains("pw"), "{said}");
    }
}
