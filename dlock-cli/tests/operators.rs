//! What an operator sees and does on every backend: who holds a lock (host, pid,
//! command, for how long) in `status`, `list` and a waiter's message, and stopping a
//! holder with `dlock release --force` (revoked) or `--force --now` (broken).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::zombie_processes)]

use std::time::Duration;

use dlock_any::{Fence, FencingToken, MemoryFence};

mod common;
use common::{
    holder_writing, output, run_sh, scratch, spawn, token_to, unique, wait_exit, wait_for_file,
};

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// A run of `job.sh` (a script of ours) holds NAME: `status --json`, `list --json`,
/// the text of both and a waiter's message name its host, its pid and `job.sh`.
fn holders_say_who_they_are(url: &str) {
    let dir = scratch();
    let name = unique("who");
    let (script, started) = (dir.join("job.sh"), dir.join("started"));
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho >> {}\nsleep 4\n", started.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut holder = spawn(url, &["run", &name, "--", script.to_str().unwrap()]);
    wait_for_file(&started, Duration::from_secs(10));
    let pid = holder.id();
    let expected = format!("{} pid {pid} (job.sh)", host());
    let status: serde_json::Value =
        serde_json::from_slice(&output(url, &["status", "--json", &name]).stdout).unwrap();
    let process = &status[0]["holder"];
    assert_eq!(process["host"], host().as_str(), "{status}");
    assert_eq!(process["pid"], pid, "{status}");
    assert_eq!(process["command"], "job.sh", "{status}");
    assert!(process["age_ms"].as_u64().is_some(), "{status}");
    let text = String::from_utf8_lossy(&output(url, &["status", &name]).stdout).into_owned();
    assert!(text.contains(&format!("held by {expected} for ")), "{text}");
    // ZooKeeper: the holder's session timeout is known only to the holder (what an
    // observer could read is its own session's), so nothing made up is shown
    let per_session = url.starts_with("zk://");
    assert_eq!(status[0]["remaining_ms"].is_null(), per_session, "{status}");
    if per_session {
        assert!(
            text.contains("held while its holder's session lives"),
            "{text}"
        );
    } else {
        assert!(text.contains(" left"), "{text}");
    }
    let listed = output(url, &["list", "--json", &name]);
    if listed.status.success() {
        let list: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(list[0]["holder"]["pid"], pid, "{list}");
        let table = String::from_utf8_lossy(&output(url, &["list", &name]).stdout).into_owned();
        assert!(table.contains(&expected), "{table}");
    }
    let waiter = output(url, &["run", "--wait", "1500ms", &name, "--", "true"]);
    let said = String::from_utf8_lossy(&waiter.stderr);
    assert!(said.contains(&format!("held by {expected}")), "{said}");
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 0);
}

/// `release --force --now` names the holder and breaks nothing without `--yes`; with
/// it, the held run stops with 75, the next run's token is higher, and a store that
/// has seen the new token refuses the old one.
fn release_force_now_breaks_the_holder(url: &str) {
    let dir = scratch();
    let name = unique("force");
    let new_token = dir.join("new");
    let (mut stuck, old) = holder_writing(url, "--ttl 3s", &name, "$DLOCK_TOKEN", 60);
    let old: u64 = old.parse().unwrap();
    let asked = output(url, &["release", "--force", "--now", &name]);
    assert_eq!(asked.status.code(), Some(2));
    let said = String::from_utf8_lossy(&asked.stderr);
    assert!(said.contains("--yes") && said.contains("(sh)"), "{said}");
    let broke = output(url, &["release", "--force", "--now", "--yes", &name]);
    let said = String::from_utf8_lossy(&broke.stderr);
    assert!(broke.status.success(), "{said}");
    assert!(
        said.contains("broke the holder") && said.contains("(sh)"),
        "{said}"
    );
    let next = token_to(url, "--wait 10s", &name, &new_token);
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    let new: u64 = wait_for_file(&new_token, Duration::from_secs(1))
        .parse()
        .unwrap();
    assert!(new > old, "the next holder's token {new} is above {old}");
    assert_eq!(wait_exit(&mut stuck, Duration::from_secs(10)), 75);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fence = MemoryFence::new();
    let resource = "accounts/7";
    rt.block_on(async {
        assert!(
            fence
                .check_and_raise(resource, FencingToken::new(new))
                .await
                .is_ok()
        );
        assert!(
            fence
                .check_and_raise(resource, FencingToken::new(old))
                .await
                .is_err(),
            "the broken holder's write is refused"
        );
    });
    let free = output(url, &["release", "--force", "--now", "--yes", &name]);
    assert!(free.status.success());
    assert!(String::from_utf8_lossy(&free.stderr).contains("nothing to break"));
}

/// `release --force --yes` revokes the holder: its run stops with 75, and the run
/// waiting behind it starts only after the revoked run's command was stopped, with a
/// higher token.
fn release_force_revokes_before_anyone_else_runs(url: &str) {
    let dir = scratch();
    let name = unique("revoke");
    let (written, stopped, started) = (
        dir.join("written"),
        dir.join("stopped"),
        dir.join("started"),
    );
    // the held command notes when it is stopped (SIGTERM reaches the whole tree)
    let held = format!(
        "trap 'date +%s%N > {}; exit 143' TERM; echo $DLOCK_TOKEN > {}; sleep 60 & wait",
        stopped.display(),
        written.display()
    );
    let mut revoked = spawn(url, &run_sh("--ttl 3s", &name, &held));
    let old: u64 = wait_for_file(&written, Duration::from_secs(15))
        .parse()
        .unwrap();
    let next = format!("date +%s%N > {}; echo $DLOCK_TOKEN", started.display());
    let mut waiter = std::process::Command::new(env!("CARGO_BIN_EXE_dlock"));
    waiter
        .env("DLOCK_URL", url)
        .args(run_sh("--wait 30s", &name, &next))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let waiter = waiter.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let asked = output(url, &["release", "--force", &name]);
    assert_eq!(asked.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&asked.stderr).contains("add --yes to revoke it"));
    let done = output(url, &["release", "--force", "--yes", &name]);
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{said}");
    assert!(
        said.contains("revoked the holder") && said.contains("(sh)"),
        "{said}"
    );
    assert_eq!(wait_exit(&mut revoked, Duration::from_secs(20)), 75);
    let out = waiter.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(new > old, "the next holder's token {new} is above {old}");
    let at =
        |f: &std::path::Path| -> u128 { wait_for_file(f, Duration::from_secs(1)).parse().unwrap() };
    assert!(
        at(&stopped) < at(&started),
        "the next run started before the revoked one was stopped"
    );
    let free = output(url, &["release", "--force", "--yes", &name]);
    assert!(free.status.success());
    assert!(String::from_utf8_lossy(&free.stderr).contains("nothing to revoke"));
}

common::every_backend!(
    holders_say_who_they_are,
    release_force_now_breaks_the_holder,
    release_force_revokes_before_anyone_else_runs,
);
