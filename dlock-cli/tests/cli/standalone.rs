//! The tests that run once, on a local SQLite file or no backend at all: the default
//! URL, the exit codes of usage and backend errors, the `--metrics-addr` endpoint.

use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use crate::common::{free_addr, output, scratch, spawn, sqlite_in, succeeded, unique, wait_exit};
use crate::{UNAVAILABLE, USAGE};

#[test]
fn default_url_is_an_sqlite_file_in_the_state_directory() {
    let state = scratch();
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .env_remove("DLOCK_URL")
        .env("XDG_STATE_HOME", &state)
        .args(["run", "default-url", "--", "sh", "-c", "echo $DLOCK_TOKEN"])
        .output()
        .unwrap();
    succeeded(&out);
    assert!(state.join("dlock/locks.sqlite").exists());
}

#[test]
fn a_state_directory_with_url_characters_in_its_name_works() {
    let state = scratch().join("odd %41 ? # name");
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .env_remove("DLOCK_URL")
        .env("XDG_STATE_HOME", &state)
        .args(["run", "odd-home", "--", "true"])
        .output()
        .unwrap();
    succeeded(&out);
    assert!(
        state.join("dlock/locks.sqlite").exists(),
        "the file where the directory says"
    );
}

#[test]
fn without_a_home_there_is_no_default_lock_file() {
    let here = scratch();
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .env_remove("DLOCK_URL")
        .env_remove("XDG_STATE_HOME")
        .env_remove("HOME")
        .current_dir(&here)
        .args(["run", "no-home", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(USAGE));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("neither HOME nor XDG_STATE_HOME"), "{err}");
    assert_eq!(
        std::fs::read_dir(&here).unwrap().count(),
        0,
        "no file in the current directory"
    );
}

#[test]
fn usage_and_backend_errors_have_their_codes() {
    let code = |args: &[&str], url: &str| output(url, args).status.code();
    assert_eq!(
        code(&["run", "x"], "memory://"),
        Some(USAGE),
        "missing command"
    );
    assert_eq!(
        code(&["run", "--ttl", "soon", "x", "--", "true"], "memory://"),
        Some(USAGE)
    );
    assert_eq!(
        code(&["run", "", "--", "true"], "memory://"),
        Some(USAGE),
        "empty name"
    );
    assert_eq!(
        code(&["run", "x", "--", "true"], "nope://"),
        Some(USAGE),
        "bad URL"
    );
    assert_eq!(
        code(
            &["status", "x"],
            "postgres://u:pw@127.0.0.1:1/db?op_timeout=1s"
        ),
        Some(UNAVAILABLE)
    );
    let out = output(
        "postgres://u:hunter2@127.0.0.1:1/db?op_timeout=1s",
        &["run", "x", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(UNAVAILABLE));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
    assert_eq!(code(&["--help"], "memory://"), Some(0));
}

/// `--metrics-addr` serves Prometheus text with the acquire and renew series while the
/// command runs.
#[test]
fn metrics_endpoint_shows_acquire_and_renew_series() {
    use std::io::{Read, Write};
    let dir = scratch();
    let url = sqlite_in(&dir, "locks.sqlite");
    let addr = free_addr();
    let name = unique("metrics");
    let mut holder = spawn(
        &url,
        &[
            "run",
            "--ttl",
            "300ms",
            "--metrics-addr",
            &addr,
            &name,
            "--",
            "sleep",
            "1.5",
        ],
    );
    sleep(Duration::from_millis(800)); // a few renewals at ttl/3
    let mut conn = std::net::TcpStream::connect(&addr).expect("metrics endpoint");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(
        text.contains("dlock_acquire_total{backend=\"sqlite\",outcome=\"acquired\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("dlock_renew_total{backend=\"sqlite\",outcome=\"ok\"}"),
        "{text}"
    );
    assert!(text.contains("dlock_acquire_wait_seconds"), "{text}");
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(10)), 0);
}
