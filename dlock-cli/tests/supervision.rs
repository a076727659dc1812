//! The command's whole process tree is bound to the lease: after every way a hold can
//! end — SIGKILL of dlock, dlock stopped past the TTL, `--max-hold`, a forwarded
//! SIGTERM, SIGINT or SIGHUP — no process of `sh -c 'sleep 60 & sleep 60; wait'` is
//! left, and after the SIGKILL none is left by the time another run takes the lock; the
//! same for a tree whose processes leave the command's group and session (GNU
//! `timeout`, a shell's job control, `setsid`). A lease broken while its command runs
//! never ends in exit 0.
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

/// A tree whose processes leave the command's process group and session, each writing
/// its pid to the file named by `$1` (six in all): GNU `timeout` (a group of its own)
/// and its child, a `bash` with job control (`set -m`: its job in a group of its own)
/// and its job, a `setsid -f` child (a session of its own, its parent gone at once),
/// and the shell that starts them. `dash` turns job control off without a terminal,
/// hence `bash`.
const ESCAPING: &str = r#"P=$1
echo $$ >> "$P"
sh -c 'echo $$ >> "$1"; exec timeout 60 sh -c "echo \$\$ >> "\$1"; exec sleep 60" sh "$1"' sh "$P" &
bash -c 'echo $$ >> "$1"; set -m; (echo $BASHPID >> "$1"; exec sleep 60) & wait' bash "$P" &
setsid -f sh -c 'echo $$ >> "$1"; exec sleep 60' sh "$P"
wait
"#;

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
    hold_tree(subcommand, url, name, args, &["sh", "-c", &script], pids, 3)
}

/// As [`hold`], the command [`ESCAPING`]'s tree: the dlock child and its six pids.
fn hold_escaping(url: &str, name: &str, args: &[&str], pids: &Path) -> (Child, Vec<i32>) {
    let script = pids.with_file_name("escaping.sh");
    std::fs::write(&script, ESCAPING).unwrap();
    let (script, pids_arg) = (script.display().to_string(), pids.display().to_string());
    hold_tree("run", url, name, args, &["sh", &script, &pids_arg], pids, 6)
}

/// Starts `dlock SUBCOMMAND ARGS NAME -- COMMAND…` and waits until `count` pids are in
/// `pids`; the dlock child and those pids.
fn hold_tree(
    subcommand: &str,
    url: &str,
    name: &str,
    args: &[&str],
    command: &[&str],
    pids: &Path,
    count: usize,
) -> (Child, Vec<i32>) {
    let mut all: Vec<&str> = vec![subcommand];
    all.extend_from_slice(args);
    all.push(name);
    all.push("--");
    all.extend_from_slice(command);
    let child = spawn(url, &all);
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let read = std::fs::read_to_string(pids).unwrap_or_default();
        let got: Vec<i32> = read.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if got.len() == count {
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

/// SIGKILL of dlock: a tree that left the command's group and session is gone too
/// before the next run gets the lock.
fn sigkill_of_dlock_takes_an_escaping_tree_down(url: &str) {
    let dir = scratch();
    let name = unique("sigkill-escaping");
    let (pids, check) = (dir.join("pids"), dir.join("check"));
    let (mut holder, tree) = hold_escaping(url, &name, &["--ttl", "3s"], &pids);
    kill(pid_of(&holder), Signal::SIGKILL).unwrap();
    let _ = holder.wait();
    nothing_left_when_the_next_run_holds("run", url, &name, &tree, &check);
}

/// [`sigkill_of_dlock_takes_the_tree_down`] for `dlock run` or `dlock elect`.
fn sigkill_of(subcommand: &str, url: &str) {
    let dir = scratch();
    let name = unique("sigkill-tree");
    let (pids, check) = (dir.join("pids"), dir.join("check"));
    let (mut holder, tree) = hold_as(subcommand, url, &name, &["--ttl", "3s"], &pids);
    kill(pid_of(&holder), Signal::SIGKILL).unwrap();
    let _ = holder.wait();
    nothing_left_when_the_next_run_holds(subcommand, url, &name, &tree, &check);
}

/// The next `dlock SUBCOMMAND` of `name` looks for the processes of `tree` the moment
/// it has the lock (writing the live ones to `check`): there must be none.
fn nothing_left_when_the_next_run_holds(
    subcommand: &str,
    url: &str,
    name: &str,
    tree: &[i32],
    check: &Path,
) {
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
    args.extend_from_slice(&[name, "--", "sh", "-c", &look]);
    let out = output(url, &args);
    let left = std::fs::read_to_string(check).unwrap_or_default();
    cleanup(tree);
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

/// dlock stopped past its TTL: a tree that left the command's group and session is gone
/// by the time the lease runs out.
fn stopped_dlock_cannot_outlive_its_lease_with_an_escaping_tree(url: &str) {
    let dir = scratch();
    let name = unique("sigstop-escaping");
    let pids = dir.join("pids");
    let (mut holder, tree) = hold_escaping(url, &name, &["--ttl", "2s"], &pids);
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

/// `--max-hold`: a tree that left the command's group and session is stopped whole.
fn max_hold_stops_an_escaping_tree(url: &str) {
    let dir = scratch();
    let name = unique("max-hold-escaping");
    let pids = dir.join("pids");
    let (mut holder, tree) =
        hold_escaping(url, &name, &["--max-hold", "2s", "--grace", "1s"], &pids);
    let code = wait_exit(&mut holder, Duration::from_secs(15));
    let left = alive_of(&tree);
    cleanup(&tree);
    assert_eq!(code, 76);
    assert!(left.is_empty(), "alive after --max-hold: {left:?}");
}

/// An operator breaks the lock (`release --force --yes`) while its run's command is
/// busy, and the command ends before the next renewal could tell: dlock does not exit
/// 0 as if the run was clean, but 75, saying the lock was no longer held.
fn a_lease_broken_under_a_command_never_exits_0(url: &str) {
    let dir = scratch();
    let name = unique("broken-under");
    let started = dir.join("started");
    let script = format!("touch {}; sleep 2", started.display());
    let mut holder = common::dlock(url)
        .args(["run", "--ttl", "30s", &name, "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_path(&started, Duration::from_secs(15));
    succeeded(&output(url, &["release", "--force", "--yes", &name]));
    let code = wait_exit(&mut holder, Duration::from_secs(15));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut holder.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, 75, "{err}");
    // said either way: seen at the release, or by a renewal first (short TTLs)
    assert!(
        err.contains("no longer held") || err.contains("lost; stopped the command"),
        "{err}"
    );
}

/// The command exits leaving a process that ignores SIGTERM: the sweep kills it by the
/// lease's end as the supervisor last heard of it, not after a longer `--grace`.
fn a_sweep_stops_by_the_lease_end_not_a_longer_grace(url: &str) {
    let dir = scratch();
    let name = unique("sweep-deadline");
    let pids = dir.join("pids");
    let script = format!(
        "(trap '' TERM; echo $(sh -c 'echo $PPID') >> {}; exec sleep 60) & sleep 0.5",
        pids.display()
    );
    let mut holder = spawn(
        url,
        &[
            "run", "--ttl", "3s", "--grace", "60s", &name, "--", "sh", "-c", &script,
        ],
    );
    let left = common::wait_for_file(&pids, Duration::from_secs(15));
    let pid: i32 = left.parse().unwrap();
    let gone = gone_within(&[pid], Duration::from_secs(10));
    cleanup(&[pid]);
    assert!(
        gone.is_empty(),
        "the sweep waited out the 60 s grace: {gone:?}"
    );
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 0);
}

/// A SIGTERM sent to dlock the moment its supervisor exists — before the command runs —
/// is not swallowed: the command starts and gets it (here before it can do anything: it
/// ends by it, 143), rather than running its ten seconds to the end.
fn a_signal_while_the_supervisor_starts_reaches_the_command(url: &str) {
    let name = unique("early-signal");
    let mut holder = spawn(url, &["run", &name, "--", "sleep", "10"]);
    let dlock = pid_of(&holder);
    let end = Instant::now() + Duration::from_secs(15);
    while children_of(dlock.as_raw()).is_empty() {
        assert!(Instant::now() < end, "no supervisor started");
        std::thread::sleep(Duration::from_micros(200));
    }
    kill(dlock, Signal::SIGTERM).unwrap();
    let code = wait_exit(&mut holder, Duration::from_secs(8));
    assert_eq!(code, 143, "the command did not get the SIGTERM");
}

/// Job control cannot stop the supervisor while it guards the deadline: its group gets
/// SIGTSTP (Ctrl-Z on a terminal), then dlock is stopped past the TTL — the tree is
/// still gone by the time the lease runs out.
fn a_suspended_job_cannot_outlive_its_lease(url: &str) {
    let dir = scratch();
    let name = unique("tstp-tree");
    let pids = dir.join("pids");
    let (mut holder, tree) = hold_escaping(url, &name, &["--ttl", "2s"], &pids);
    let helper = children_of(pid_of(&holder).as_raw())[0];
    // the helper's group: the helper and the command's shell (timeout's and the job's
    // own groups are elsewhere)
    let _ = nix::sys::signal::killpg(Pid::from_raw(helper), Signal::SIGTSTP);
    kill(pid_of(&holder), Signal::SIGSTOP).unwrap();
    let left = gone_within(&tree, Duration::from_secs(4));
    kill(pid_of(&holder), Signal::SIGCONT).unwrap();
    let _ = nix::sys::signal::killpg(Pid::from_raw(helper), Signal::SIGCONT);
    cleanup(&tree);
    assert!(
        left.is_empty(),
        "alive past the TTL with the supervisor's group suspended: {left:?}"
    );
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 75);
}

/// The pids whose parent is `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
                    == Some(parent)
            })
        })
        .collect()
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
    sigkill_of_dlock_takes_an_escaping_tree_down,
    stopped_dlock_cannot_outlive_its_lease,
    stopped_dlock_cannot_outlive_its_lease_with_an_escaping_tree,
    max_hold_stops_the_tree,
    max_hold_stops_an_escaping_tree,
    forwarded_signals_reach_the_tree,
    a_lease_broken_under_a_command_never_exits_0,
    a_sweep_stops_by_the_lease_end_not_a_longer_grace,
    a_signal_while_the_supervisor_starts_reaches_the_command,
    a_suspended_job_cannot_outlive_its_lease,
);
