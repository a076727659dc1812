//! The command under the lock and what `dlock` reports, on every backend: `status`,
//! signals forwarded, exit codes passed through, `--permits` and `--shared` runs.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{
    output, scratch, spawn, spawn_holder, status_of, unique, wait_exit, wait_for_file,
};
use crate::{BUSY, CANNOT_EXEC, TIMEOUT, USAGE};

/// `status` reports holder and token, as text and JSON.
pub(crate) fn status_reports_holder(url: &str) {
    let name = unique("status");
    let (mut holder, marker) = spawn_holder(url, &name, &[], 2);
    let token = wait_for_file(&marker, Duration::from_secs(10));
    let out = output(url, &["status", &name, "cli/never-taken"]);
    assert_eq!(out.status.code(), Some(1), "one of the names is free");
    assert_eq!(
        output(url, &["status", &name]).status.code(),
        Some(0),
        "held"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{name}: held by")) && text.contains(&format!("(token {token})")),
        "{text}"
    );
    assert!(text.contains("cli/never-taken: free"), "{text}");
    let out = output(url, &["status", "--json", &name]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(
        json.starts_with(&format!("[{{\"name\":\"{name}\",\"held\":true,")),
        "{json}"
    );
    assert!(json.contains(&format!("\"token\":{token},")), "{json}");
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(10)), 0);
    let out = output(url, &["status", "--json", &name]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("[{{\"name\":\"{name}\",\"held\":false}}]")
    );
    assert_eq!(out.status.code(), Some(1), "free, with --json too");
}

/// A run that waited for its lock is shown held from its grant, not from when it began
/// to wait: what an operator reads before breaking a lock.
pub(crate) fn a_hold_counts_from_its_grant(url: &str) {
    let name = unique("age");
    let (mut first, first_marker) = spawn_holder(url, &name, &[], 3);
    wait_for_file(&first_marker, Duration::from_secs(10));
    // waits about three seconds behind the first
    let (mut second, second_marker) = spawn_holder(url, &name, &["--wait", "30s"], 3);
    wait_for_file(&second_marker, Duration::from_secs(20));
    let running = std::time::Instant::now();
    let json = status_of(url, &name);
    // granted before its command ran: by at most the time it took to say so and start
    let bound = running.elapsed() + Duration::from_secs(1);
    let age = json["holder"]["age_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no age in {json}"));
    assert!(
        u128::from(age) < bound.as_millis(),
        "granted moments ago, shown held for {age} ms (the wait was about 3 s): {json}"
    );
    assert!(
        json["holder"]["pid"].as_u64() == Some(u64::from(second.id())),
        "the waiter holds it: {json}"
    );
    assert_eq!(wait_exit(&mut first, Duration::from_secs(10)), 0);
    assert_eq!(wait_exit(&mut second, Duration::from_secs(20)), 0);
}

/// SIGTERM to dlock reaches the command; dlock exits with the command's status and
/// releases the lock.
pub(crate) fn signals_are_forwarded_and_lock_released(url: &str) {
    let dir = scratch();
    let name = unique("forward");
    let marker = dir.join("ready");
    let script = format!(
        "trap 'exit 42' TERM; echo ready > {}; while :; do sleep 0.05; done",
        marker.display()
    );
    let mut holder = spawn(url, &["run", &name, "--", "sh", "-c", &script]);
    wait_for_file(&marker, Duration::from_secs(10));
    kill(
        Pid::from_raw(i32::try_from(holder.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(10)), 42);
    let out = output(url, &["run", "--wait", "0", &name, "--", "true"]);
    assert!(
        out.status.success(),
        "released at once: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The command's exit code passes through; a command that cannot start gives 127 and
/// leaves the lock free.
pub(crate) fn exit_codes_pass_through(url: &str) {
    let name = unique("codes");
    assert_eq!(
        output(url, &["run", &name, "--", "sh", "-c", "exit 7"])
            .status
            .code(),
        Some(7)
    );
    assert_eq!(
        output(url, &["run", &name, "--", "sh", "-c", "kill -9 $$"])
            .status
            .code(),
        Some(128 + 9)
    );
    let out = output(url, &["run", &name, "--", "/nonexistent/command"]);
    assert_eq!(out.status.code(), Some(CANNOT_EXEC));
    // found but not a program: 126, as a shell says
    let out = output(url, &["run", &name, "--", "/etc/hostname"]);
    assert_eq!(out.status.code(), Some(CANNOT_EXEC - 1), "{out:?}");
    assert_eq!(
        output(url, &["run", "--wait", "0", &name, "--", "true"])
            .status
            .code(),
        Some(0)
    );
}

/// `--permits N`: N runs at once, the N+1st busy, another N busy (or timed out) too;
/// `--shared` runs overlap and keep `--exclusive` out; `status` lists the holders.
/// Redlock offers neither: a usage error that says so.
pub(crate) fn permits_and_shared_runs(url: &str) {
    let name = unique("permits");
    if url.starts_with("redlock") {
        let out = output(url, &["run", "--permits", "2", &name, "--", "true"]);
        assert_eq!(out.status.code(), Some(USAGE));
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not offer"));
        return;
    }
    let (mut h1, m1) = spawn_holder(url, &name, &["--permits", "2"], 8);
    let (mut h2, m2) = spawn_holder(url, &name, &["--permits", "2"], 8);
    wait_for_file(&m1, Duration::from_secs(10));
    wait_for_file(&m2, Duration::from_secs(10));
    let code = |args: &[&str]| output(url, args).status.code();
    assert_eq!(
        code(&["run", "--permits", "2", "--wait", "0", &name, "--", "true"]),
        Some(BUSY)
    );
    // another count is busy while the name is held (it would hold on an idle name),
    // and a wait that runs out on it is a timeout: both obey --busy-exit
    let out = output(
        url,
        &["run", "--permits", "3", "--wait", "0", &name, "--", "true"],
    );
    assert_eq!(out.status.code(), Some(BUSY));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use with 2 permits"));
    let out = output(
        url,
        &["run", "--permits", "3", "--wait", "1s", &name, "--", "true"],
    );
    assert_eq!(out.status.code(), Some(TIMEOUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use with 2 permits"));
    let skipped = ["--busy-exit", "0", "--permits", "3", &name, "--", "true"];
    for wait in ["0", "1s"] {
        let mut args = vec!["run", "--wait", wait];
        args.extend_from_slice(&skipped);
        assert_eq!(code(&args), Some(0), "--wait {wait} --busy-exit 0");
    }
    // the plain lock of the same name is another lock
    assert_eq!(code(&["run", "--wait", "0", &name, "--", "true"]), Some(0));
    let text = String::from_utf8_lossy(&output(url, &["status", &name]).stdout).into_owned();
    assert!(text.contains("(semaphore): 2 of 2 permits held"), "{text}");
    let json =
        String::from_utf8_lossy(&output(url, &["status", "--json", &name]).stdout).into_owned();
    assert!(json.contains("\"semaphore\":{\"permits\":2"), "{json}");
    let (mut reader, r1) = spawn_holder(url, &name, &["--shared"], 8);
    wait_for_file(&r1, Duration::from_secs(10));
    let (mut second, r2) = spawn_holder(url, &name, &["--shared"], 8);
    wait_for_file(&r2, Duration::from_secs(10));
    assert_eq!(
        code(&["run", "--exclusive", "--wait", "0", &name, "--", "true"]),
        Some(BUSY)
    );
    let text = String::from_utf8_lossy(&output(url, &["status", &name]).stdout).into_owned();
    assert!(text.contains("(read-write): read by 2"), "{text}");
    for child in [&mut h1, &mut h2, &mut reader, &mut second] {
        assert_eq!(wait_exit(child, Duration::from_secs(15)), 0);
    }
    assert_eq!(
        code(&["run", "--exclusive", "--wait", "0", &name, "--", "true"]),
        Some(0)
    );
}
