//! What `dlock run --metrics-addr` serves: a live scrape that passes
//! `promtool check metrics`, and the waiters gauge counting a blocked acquire.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use super::promtool;
use crate::common::poll;
use crate::common::{free_addr, sqlite_in};

/// What `dlock run --metrics-addr` serves passes `promtool check metrics`: every metric
/// described, latencies as histograms (not summaries), the waiters gauge there.
#[cfg(feature = "server-tests")]
#[test]
fn live_scrape_passes_promtool_check_metrics() {
    let dir = std::env::temp_dir().join(format!("dlock-obs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = free_addr();
    let mut holder = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .args([
            "run",
            "--ttl",
            "300ms",
            "--metrics-addr",
            &addr,
            "observed",
            "--",
            "sleep",
            "1.5",
        ])
        .env("DLOCK_URL", sqlite_in(&dir, "locks.sqlite"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // a few renewals at ttl/3 once it holds
    let reply = poll(|| {
        let reply = try_scrape(&addr)?;
        reply.contains("dlock_renew_total").then_some(reply)
    });
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let _ = holder.wait();
    for described in [
        "# HELP dlock_acquire_total ",
        "# HELP dlock_renew_total ",
        "# HELP dlock_waiters ",
        "# TYPE dlock_waiters gauge",
        "# HELP dlock_acquire_wait_seconds ",
        "# TYPE dlock_acquire_wait_seconds histogram",
        "dlock_acquire_wait_seconds_bucket{backend=\"sqlite\",le=\"0.00005\"}",
        "dlock_acquire_wait_seconds_bucket{backend=\"sqlite\",le=\"60\"}",
        "# TYPE dlock_hold_age_seconds gauge",
        "dlock_hold_age_seconds{backend=\"sqlite\",lock=\"observed\"}",
    ] {
        assert!(body.contains(described), "no {described:?} in:\n{body}");
    }
    assert!(!body.contains("summary"), "{body}");
    promtool(&["check", "metrics"], body);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scrapes `addr` once; `None` while nothing listens there yet.
fn try_scrape(addr: &str) -> Option<String> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// `dlock_waiters` counts an `acquire` while it waits, and not after it got the lock.
#[test]
fn waiters_gauge_counts_a_blocked_acquire() {
    let dir = std::env::temp_dir().join(format!("dlock-obs-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = sqlite_in(&dir, "locks.sqlite");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dlock"))
            .args(args)
            .env("DLOCK_URL", &url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut holder = run(&["run", "queue", "--", "sleep", "4"]);
    let held = || {
        Command::new(env!("CARGO_BIN_EXE_dlock"))
            .args(["status", "queue"])
            .env("DLOCK_URL", &url)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("held by"))
            .unwrap_or(false)
    };
    poll(|| held().then(String::new));
    let addr = free_addr();
    let mut waiter = run(&[
        "run",
        "--wait",
        "30s",
        "--metrics-addr",
        &addr,
        "queue",
        "--",
        "sleep",
        "2",
    ]);
    let waiting = poll(|| try_scrape(&addr).filter(|s| s.contains("dlock_waiters")));
    assert!(
        waiting.contains("dlock_waiters{backend=\"sqlite\"} 1"),
        "the holder still holds for seconds, so its waiter must be counted: {waiting}"
    );
    let _ = holder.wait();
    // the waiter polls, then holds
    let holding = poll(|| try_scrape(&addr).filter(|s| s.contains("outcome=\"acquired\"} 1")));
    assert!(
        holding.contains("dlock_waiters{backend=\"sqlite\"} 0"),
        "{holding}"
    );
    let _ = waiter.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
