//! The command's whole process tree is bound to the lease: after every way a hold can
//! end — SIGKILL of dlock, dlock stopped past the TTL, `--max-hold`, a forwarded
//! SIGTERM, SIGINT or SIGHUP — no process of `sh -c 'sleep 60 & sleep 60; wait'` is
//! left, and after the SIGKILL none is left by the time another run takes the lock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::zombie_processes)]

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{alive, output, scratch, spawn, succeeded, unique, wait_exit};

/// `sh -c 'sleep 60 & sleep 60; wait'`, each process writing its pid to `pids` first
/// (a subshell's `$$` is its parent's: its own pid is the `$PPID` of a child).
fn tree(pids: &Path) -> String {
    let p = pids.display();
    format!(
        "echo $$ >> {p}; (echo $(sh -c 'echo $PPID') >> {p}; exec sleep 60) & \
         (echo $(sh -c 'echo $PPID') >> {p}; exec sleep 60); wait"
    )
}

/// Starts `dlock run ARGS NAME -- sh -c TREE`; the dlock child and the tree's three pids.
fn hold(url: &str, name: &str, args: &[&str], pids: &Path) -> (Child, Vec<i32>) {
    hold_as("run", url, name, args, pids)
}

/// As [`hold`], with `dlock elect` or `dlock run` as `subcommand`.
fn hold_as(
    subcommand: &str,
    url: &str,
    name: &str,
    args: &[&str],
    pids: &Path,
) -> (Child, Vec<i32>) {
    let script = tree(pids);
    let mut all: Vec<&str> = vec![subcommand];
    all.extend_from_slice(args);
    all.extend_from_slice(&[name, "--", "sh", "-c", &script]);
    let child = spawn(url, &all);
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let read = std::fs::read_to_string(pids).unwrap_or_default();
        let got: Vec<i32> = read.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if got.len() == 3 {
            return (child, got);
        }
        assert!(
            Instant::now() < end,
            "the command's tree never started: {read:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive_of(pids: &[i32]) -> Vec<i32> {
    pids.iter().copied().filter(|&p| alive(p)).collect()
}

/// Waits up to `within` for every pid to be gone; the ones still alive then.
fn gone_within(pids: &[i32], within: Duration) -> Vec<i32> {
    let end = Instant::now() + within;
    loop {
        let left = alive_of(pids);
        if left.is_empty() || Instant::now() >= end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap())
}

fn cleanup(pids: &[i32]) {
    for &p in pids {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
}

/// SIGKILL of dlock: the tree is gone before the lease could expire; the next run,
/// which gets the lock, finds none of it.
fn sigkill_of_dlock_takes_the_tree_down(url: &str) {
    for subcommand in ["run", "elect"] {
        sigkill_of(subcommand, url);
    }
}

/// [`sigkill_of_dlock_takes_the_tree_down`] for `dlock run` or `dlock elect`.
fn sigkill_of(subcommand: &str, url: &str) {
    let dir = scratch();
    let name = unique("sigkill-tree");
    let (pids, check) = (dir.join("pids"), dir.join("check"));
    let (mut holder, tree) = hold_as(subcommand, url, &name, &["--ttl", "3s"], &pids);
    kill(pid_of(&holder), Signal::SIGKILL).unwrap();
    let _ = holder.wait();
    // the next holder looks for the old tree the moment it has the lock
    let look = format!(
        "for p in {}; do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); \
         [ -n \"$s\" ] && [ \"$s\" != Z ] && echo $p; done > {}; true",
        tree.iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        check.display()
    );
    let next: &[&str] = match subcommand {
        "run" => &["run", "--wait", "30s", "-q"],
        _ => &["elect", "-q"],
    };
    let mut args = next.to_vec();
    args.extend_from_slice(&[&name, "--", "sh", "-c", &look]);
    let out = output(url, &args);
    let left = std::fs::read_to_string(&check).unwrap_or_default();
    cleanup(&tree);
    succeeded(&out);
    assert_eq!(
        left.trim(),
        "",
        "{subcommand}: alive when the next run took the lock"
    );
}

/// dlock stopped (SIGSTOP) past its TTL cannot renew: the tree is gone by the time the
/// lease runs out, while dlock is still stopped; resumed, dlock exits 75.
fn stopped_dlock_cannot_outlive_its_lease(url: &str) {
    let dir = scratch();
    let name = unique("sigstop-tree");
    let pids = dir.join("pids");
    let (mut holder, tree) = hold(url, &name, &["--ttl", "2s"], &pids);
    kill(pid_of(&holder), Signal::SIGSTOP).unwrap();
    let left = gone_within(&tree, Duration::from_secs(4));
    kill(pid_of(&holder), Signal::SIGCONT).unwrap();
    cleanup(&tree);
    assert!(
        left.is_empty(),
        "alive past the TTL while dlock was stopped: {left:?}"
    );
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 75);
}

/// `--max-hold`: the whole tree is stopped, dlock exits 76 once it is gone.
fn max_hold_stops_the_tree(url: &str) {
    let dir = scratch();
    let name = unique("max-hold-tree");
    let pids = dir.join("pids");
    let (mut holder, tree) = hold(url, &name, &["--max-hold", "1s", "--grace", "2s"], &pids);
    let code = wait_exit(&mut holder, Duration::from_secs(15));
    let left = alive_of(&tree);
    cleanup(&tree);
    assert_eq!(code, 76);
    assert!(left.is_empty(), "alive after --max-hold: {left:?}");
}

/// SIGTERM, SIGINT and SIGHUP to dlock reach the whole group; once dlock has exited,
/// nothing of the tree runs (a background job of `sh` ignores SIGINT: it is swept).
fn forwarded_signals_reach_the_tree(url: &str) {
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        let dir = scratch();
        let name = unique("signal-tree");
        let pids = dir.join("pids");
        let (mut holder, tree) = hold(url, &name, &["--grace", "2s"], &pids);
        kill(pid_of(&holder), signal).unwrap();
        let code = wait_exit(&mut holder, Duration::from_secs(15));
        let left = alive_of(&tree);
        cleanup(&tree);
        assert_ne!(code, 0, "{signal}");
        assert!(
            left.is_empty(),
            "{signal}: alive after dlock exited: {left:?}"
        );
        let free = output(url, &["run", "--wait", "0", &name, "--", "true"]);
        assert!(free.status.success(), "{signal}: the lock was not released");
    }
}

common::every_backend!(
    sigkill_of_dlock_takes_the_tree_down,
    stopped_dlock_cannot_outlive_its_lease,
    max_hold_stops_the_tree,
    forwarded_signals_reach_the_tree,
);
