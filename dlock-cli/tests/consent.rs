//! No run without a lock unless asked for; what the library logs reaches stderr; cron
//! runs that skip can be quiet and succeed.
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use dlock_conformance::{FaultMode, FaultProxy, required_env};

mod common;
use common::{dlock, output, scratch, scratch_sqlite, spawn, unique, wait_exit};

/// Asserts that `out`'s stderr says `words`.
fn says(out: &std::process::Output, words: &str) {
    let stderr = stderr_of(out);
    assert!(stderr.contains(words), "{words:?} in:\n{stderr}");
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A Redis nobody listens on.
const DOWN: &str = "redis://127.0.0.1:1/";

#[test]
fn a_local_fallback_is_refused() {
    let out = output(
        &format!("{DOWN}?fallback=local"),
        &["run", "x", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2));
    says(&out, "exclude nobody");
}

#[test]
fn proceeding_unlocked_needs_the_flag_and_warns_every_time() {
    let url = format!("{DOWN}?fallback=proceed");
    let out = output(&url, &["run", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    says(&out, "--allow-unlocked");
    for _ in 0..2 {
        let out = output(
            &url,
            &[
                "run",
                "--allow-unlocked",
                "-q",
                "x",
                "--",
                "sh",
                "-c",
                "echo $DLOCK_UNLOCKED $DLOCK_TOKEN",
            ],
        );
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1 0");
        says(&out, "WITHOUT a lock");
    }
}

#[test]
fn elections_and_tickets_never_fall_back() {
    for args in [&["elect", "x", "--", "true"][..], &["acquire", "x"][..]] {
        for policy in ["local", "proceed"] {
            let out = output(&format!("{DOWN}?fallback={policy}"), args);
            assert_eq!(out.status.code(), Some(2), "{args:?} {policy}");
        }
    }
}

#[test]
fn an_empty_url_is_refused_not_replaced_by_the_default() {
    let out = output("", &["run", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    says(&out, "empty");
    let out = dlock("sqlite:///unused")
        .args(["run", "--url", "", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
}

/// Renewals through a proxy that stops answering: the library's warning is on stderr
/// without -v, and the command is stopped before its lease runs out.
#[cfg(feature = "server-tests")]
#[test]
fn a_failing_renewal_is_a_warning_on_stderr() {
    let redis = required_env("DLOCK_TEST_REDIS_URL");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt
        .block_on(FaultProxy::start(redis.trim_start_matches("redis://")))
        .unwrap();
    let url = format!("redis://{}", proxy.addr());
    let dir = scratch();
    let started = dir.join("started");
    let mut run = spawn(
        &url,
        &[
            "run",
            "--ttl",
            "1500ms",
            &unique("renewal-warning"),
            "--",
            "sh",
            "-c",
            &format!("echo >> {}; exec sleep 30", started.display()),
        ],
    );
    common::wait_for_file(&started, Duration::from_secs(10));
    proxy.set_mode(FaultMode::Blackhole);
    assert_eq!(wait_exit(&mut run, Duration::from_secs(20)), 75);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("dlock: warning: "), "{err}");
    // the warning, and why: the request's error or the attempt's time limit
    assert!(err.contains("lease suspect: renewal"), "{err}");
    assert!(err.contains("error=") || err.contains("timeout="), "{err}");
}

#[test]
fn a_skipped_run_can_be_quiet_and_succeed() {
    let url = scratch_sqlite("locks.sqlite");
    let name = unique("skip");
    let dir = scratch();
    let held = dir.join("held");
    let mut holder = dlock(&url)
        .args([
            "run",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo >> {}; sleep 3", held.display()),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for_file(&held, Duration::from_secs(10));
    // busy: 73 by default, or what --busy-exit says; -q says nothing either way
    for (flags, code) in [
        ("--wait 0", 73),
        ("--wait 0 --busy-exit 0", 0),
        ("--wait 200ms --busy-exit 3", 3),
    ] {
        let mut args = vec!["run", "-q"];
        args.extend(flags.split_whitespace());
        args.extend([name.as_str(), "--", "true"]);
        let busy = output(&url, &args);
        assert_eq!(busy.status.code(), Some(code), "{flags}");
        assert_eq!(stderr_of(&busy), "", "{flags}: -q says nothing on a skip");
    }
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 0);
}

#[test]
fn doctor_says_an_sqlite_file_excludes_one_host() {
    let url = scratch_sqlite("locks.sqlite");
    let out = output(&url, &["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("this host only"), "{text}");
}
