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

/// A password may hold any character once percent-encoded, and no output of a failing
/// command shows it: written raw, `/ ? #` are explained (exit 2); encoded, the server
/// is looked for (exit 69). Every backend with a password, against a closed port.
#[test]
fn a_password_never_shows_and_any_character_can_be_encoded() {
    let port = dlock_conformance::free_port();
    let raw = "p?a#s/s%w@rd:x";
    let encoded = "p%3Fa%23s%2Fs%25w%40rd%3Ax";
    let mut schemes = vec![
        ("postgres", "/db"),
        ("mysql", "/db"),
        ("redis", ""),
        ("redlock", ""),
        ("zk", ""),
    ];
    if cfg!(feature = "etcd") {
        schemes.push(("etcd", ""));
    }
    // every fragment of the password that a client could echo
    let fragments = ["a#s", "s/s", "%w@", "rd:x", "a%23", "%2Fs", "%25w", "%40rd"];
    for (scheme, path) in schemes {
        for (password, expected) in [(raw, 2), (encoded, 69)] {
            let url = format!("{scheme}://user:{password}@127.0.0.1:{port}{path}");
            let run = ["run", "--wait", "0", "n", "--", "true"];
            for args in [&["status", "n"][..], &run, &["doctor"]] {
                let out = dlock(&url).args(args).output().unwrap();
                let all = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                for f in fragments {
                    assert!(!all.contains(f), "{url} {args:?} shows {f:?}: {all}");
                }
                if args[0] != "doctor" {
                    assert_eq!(out.status.code(), Some(expected), "{url} {args:?}: {all}");
                }
                if expected == 2 {
                    assert!(all.contains("percent-encode"), "{url} {args:?}: {all}");
                }
            }
        }
    }
}
