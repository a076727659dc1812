//! A lock held across shell commands (`dlock acquire`, `renew`, `release`, `status` by
//! ticket), and `dlock list`, as separate processes on every backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::thread::sleep;
use std::time::Duration;

use dlock_conformance::required_env;

mod common;
use common::{output, poll, spawn, unique, wait_exit};

const BUSY: i32 = 73;
const LEASE_LOST: i32 = 75;
const USAGE: i32 = 2;

fn code(url: &str, args: &[&str]) -> i32 {
    output(url, args).status.code().unwrap_or(-1)
}

/// `dlock acquire`'s ticket, from its stdout.
fn acquire(url: &str, args: &[&str]) -> String {
    let out = output(url, &[&["acquire"], args].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ticket = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(ticket.starts_with("dlock-ticket1:"), "{ticket}");
    ticket
}

/// The lock is held across processes by a ticket: taken by one, checked, renewed and
/// released by others; afterwards the ticket is refused.
fn ticket_round_trip(url: &str) {
    let name = unique("ticket");
    let ticket = acquire(url, &["--ttl", "1m", &name]);
    // the TTL asked for on every backend (on ZooKeeper not the 2 s session's)
    let written: dlock_any::Ticket = ticket.parse().unwrap();
    assert_eq!(written.ttl(), Duration::from_secs(60), "{ticket}");
    // `dlock acquire` has exited; the lock is still held
    assert_eq!(code(url, &["acquire", &name]), BUSY);
    assert_eq!(
        code(url, &["run", "--wait", "0", &name, "--", "true"]),
        BUSY
    );
    let status = output(url, &["status", &ticket]);
    assert_eq!(status.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("the ticket's lease holds it"),
        "{status:?}"
    );
    // renew prints the ticket again, carrying the new TTL; a ZooKeeper ticket's node
    // keeps the TTL it was handed over with
    if url.starts_with("zk://") {
        assert_eq!(code(url, &["renew", "--ttl", "2m", &ticket]), USAGE);
        let renewed = output(url, &["renew", &ticket]);
        assert_eq!(renewed.status.code(), Some(0), "{renewed:?}");
        assert_eq!(String::from_utf8(renewed.stdout).unwrap().trim(), ticket);
        assert_eq!(code(url, &["release", &ticket]), 0);
        assert_eq!(code(url, &["run", "--wait", "0", &name, "--", "true"]), 0);
        return;
    }
    let renewed = output(url, &["renew", "--ttl", "2m", &ticket]);
    assert_eq!(renewed.status.code(), Some(0), "{renewed:?}");
    let renewed = String::from_utf8(renewed.stdout).unwrap();
    assert!(
        renewed.starts_with(&format!(
            "dlock-ticket1:{}:120000:",
            ticket.split(':').nth(1).unwrap()
        )),
        "{renewed}"
    );
    // from the environment, so it stays out of the process list
    let released = common::dlock(url)
        .args(["release"])
        .env("DLOCK_TICKET", renewed.trim())
        .output()
        .unwrap();
    assert_eq!(released.status.code(), Some(0), "{released:?}");
    // gone: refused everywhere, and the name is free
    assert_eq!(code(url, &["status", &ticket]), LEASE_LOST);
    assert_eq!(code(url, &["renew", &ticket]), LEASE_LOST);
    assert_eq!(code(url, &["release", &ticket]), LEASE_LOST);
    assert_eq!(code(url, &["run", "--wait", "0", &name, "--", "true"]), 0);
    // a new holder's lock is not the old ticket's
    let next = acquire(url, &[&name]);
    assert_eq!(code(url, &["release", &ticket]), LEASE_LOST);
    assert_eq!(code(url, &["release", &next]), 0);
}

/// A ticket whose lease expired is refused; so are a foreign and a garbled one.
fn expired_and_foreign_tickets_are_refused(url: &str) {
    let name = unique("expiring");
    let ticket = acquire(url, &["--ttl", "500ms", &name]);
    // a ZooKeeper ticket's node goes at the container manager's looks (every second
    // on the test servers): its last renewal's, then its own; until then the lock is
    // still the ticket's, and a late renewal keeps it
    sleep(Duration::from_millis(if url.starts_with("zk://") {
        3000
    } else {
        1500
    }));
    assert_eq!(code(url, &["renew", &ticket]), LEASE_LOST);
    assert_eq!(code(url, &["release", &ticket]), LEASE_LOST);
    let held = acquire(url, &[&name]);
    let backend = held.split(':').nth(1).unwrap();
    let foreign = held.replacen(&format!(":{backend}:"), ":elsewhere:", 1);
    assert_eq!(code(url, &["release", &foreign]), USAGE);
    assert_eq!(code(url, &["status", &foreign]), USAGE);
    assert_eq!(code(url, &["release", "dlock-ticket1:nonsense"]), USAGE);
    assert_eq!(code(url, &["release", &held]), 0);
}

/// `dlock acquire` without `--ttl` takes five minutes, or the longest the backend
/// takes if shorter (Redlock: its restart delay, as its default of a minute here).
fn the_default_ttl_is_one_the_backend_takes(url: &str) {
    // the shared test servers run Redlock without a restart delay: this one has one
    let url = &url.replace("restart-delay=0s", "restart-delay=1m");
    let name = unique("default-ttl");
    let ticket = acquire(url, &[&name]);
    let written: dlock_any::Ticket = ticket.parse().unwrap();
    let expected = if url.starts_with("redlock") { 60 } else { 300 };
    assert_eq!(written.ttl(), Duration::from_secs(expected), "{ticket}");
    assert_eq!(code(url, &["release", &ticket]), 0);
}

/// `dlock list` shows a lock held by a running `dlock run` (with its waiter, where the
/// backend counts them), and not once it is released.
fn list_shows_a_running_holder(url: &str) {
    let prefix = unique("listed");
    let name = format!("{prefix}/job");
    let listed_json = || {
        let out = output(url, &["list", "--json", &prefix]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut holder = spawn(url, &["run", &name, "--", "sleep", "8"]);
    let listed = poll(|| Some(listed_json()).filter(|l| l.contains(&name)));
    assert!(
        listed.starts_with(&format!("[{{\"name\":\"{name}\",\"owner\":\"")),
        "{listed}"
    );
    let mut waiter = spawn(url, &["run", "--wait", "30s", &name, "--", "true"]);
    // counted where the backend can tell (etcd, ZooKeeper), else not at all
    let listed = poll(|| {
        Some(listed_json())
            .filter(|l| l.contains("\"waiters\":null") || l.contains("\"waiters\":1"))
    });
    assert!(listed.contains(&name), "{listed}");
    let text = String::from_utf8(output(url, &["list", &prefix]).stdout).unwrap();
    assert!(text.starts_with("NAME") && text.contains(&name), "{text}");
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(20)), 0);
    assert_eq!(wait_exit(&mut waiter, Duration::from_secs(30)), 0);
    let after = String::from_utf8(output(url, &["list", "--json", &prefix]).stdout).unwrap();
    assert_eq!(after.trim(), "[]");
}

/// `dlock list` shows each holder of a semaphore's permits and of a read-write lock's
/// read side, one entry each with its kind, beside a mutex's holder. (Redlock has
/// neither semaphores nor read-write locks: its mutex alone.)
fn list_shows_permits_and_readers(url: &str) {
    let prefix = unique("listed-kinds");
    let (mutex, rw, sem) = (
        format!("{prefix}/mutex"),
        format!("{prefix}/rw"),
        format!("{prefix}/sem"),
    );
    let hold = |args: &[&str]| spawn(url, &[&["run"], args, &["--", "sleep", "4"]].concat());
    let mut runs = vec![hold(&[&mutex])];
    let mut expected = vec![(mutex.clone(), "mutex".to_owned(), None)];
    if !url.starts_with("redlock") {
        runs.push(hold(&["--permits", "3", &sem]));
        runs.push(hold(&["--permits", "3", &sem]));
        runs.push(hold(&["--shared", &rw]));
        expected.push((rw.clone(), "shared".to_owned(), None));
        expected.push((sem.clone(), "permit".to_owned(), Some(3)));
        expected.push((sem.clone(), "permit".to_owned(), Some(3)));
    }
    let listed = poll(|| {
        let out = output(url, &["list", "--json", &prefix]);
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (list.as_array()?.len() == expected.len()).then(|| list.to_string())
    });
    let list: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let kinds: Vec<(String, String, Option<u64>)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_owned(),
                h["access"].as_str().unwrap().to_owned(),
                h["permits"].as_u64(),
            )
        })
        .collect();
    assert_eq!(kinds, expected, "{list}");
    for entry in list.as_array().unwrap() {
        assert!(entry["holder"]["pid"].is_u64(), "{list}");
    }
    let text = String::from_utf8(output(url, &["list", &prefix]).stdout).unwrap();
    assert!(text.starts_with("NAME  "), "{text}");
    assert!(text.contains(" KIND "), "{text}");
    if expected.len() > 1 {
        // each permit is its own holder, with its own token
        assert_ne!(list[2]["token"], list[3]["token"], "{list}");
        assert!(
            text.contains("permit of 3") && text.contains("shared"),
            "{text}"
        );
    }
    for run in &mut runs {
        assert_eq!(wait_exit(run, Duration::from_secs(20)), 0);
    }
    let after = String::from_utf8(output(url, &["list", "--json", &prefix]).stdout).unwrap();
    assert_eq!(after.trim(), "[]");
}

/// The CLI tests' URLs, with 2 s ZooKeeper sessions.
fn url_of(backend: &str) -> String {
    match backend {
        "zookeeper" => format!(
            "zk://{}?session_timeout=2s",
            required_env("DLOCK_TEST_ZK_ADDR")
        ),
        other => common::backend_url(other),
    }
}

common::every_backend!(
    urls: crate::url_of,
    on: [sqlite, postgres, mariadb, redis, redis_sentinel, redis_cluster, redlock, etcd, zookeeper];
    ticket_round_trip,
    expired_and_foreign_tickets_are_refused,
    list_shows_a_running_holder,
    list_shows_permits_and_readers,
    the_default_ttl_is_one_the_backend_takes,
);
