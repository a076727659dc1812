//! `dlock elect`, `dlock leader`, several names in one `dlock run`, and the hold
//! limits: real processes, real signals, real servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::thread::sleep;
use std::time::{Duration, Instant};

use dlock_conformance::required_env;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{
    holder_writing, output, run_sh, scratch, spawn, unique, wait_exit, wait_for_file, watch_leader,
};

const BUSY: i32 = 73;
const MAX_HOLD: i32 = 76;

fn code(url: &str, args: &[&str]) -> i32 {
    let out = output(url, args);
    out.status
        .code()
        .unwrap_or_else(|| panic!("dlock killed: {}", String::from_utf8_lossy(&out.stderr)))
}

/// `kill -9` of the leading `dlock elect`: the standby runs its command within the
/// TTL + 1 s, with a higher epoch; `dlock leader` names the leader meanwhile.
fn elect_standby_takes_over_after_kill(url: &str) {
    let dir = scratch();
    let name = unique("elect");
    let (a_pid, a_epoch, b_epoch) = (dir.join("a.pid"), dir.join("a.epoch"), dir.join("b.epoch"));
    let script = |pid: &str, epoch: &std::path::Path| {
        format!(
            "echo $$ > {pid}; echo $DLOCK_EPOCH > {}; exec sleep 60",
            epoch.display()
        )
    };
    let mut a = spawn(
        url,
        &[
            "elect",
            "--ttl",
            "2s",
            "--value",
            "host-a:1",
            &name,
            "--",
            "sh",
            "-c",
            &script(&a_pid.display().to_string(), &a_epoch),
        ],
    );
    let epoch_a: u64 = wait_for_file(&a_epoch, Duration::from_secs(15))
        .parse()
        .unwrap();
    let b_pid = dir.join("b.pid");
    let mut b = spawn(
        url,
        &[
            "elect",
            "--ttl",
            "2s",
            "--value",
            "host-b:2",
            &name,
            "--",
            "sh",
            "-c",
            &script(&b_pid.display().to_string(), &b_epoch),
        ],
    );
    sleep(Duration::from_millis(700));
    assert!(!b_epoch.exists(), "the standby ran while a leader led");
    let shown = output(url, &["leader", &name]);
    assert_eq!(shown.status.code(), Some(0), "a leader leads");
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("host-a:1") && shown.contains(&format!("epoch {epoch_a}")),
        "{shown}"
    );

    let a_child: i32 = wait_for_file(&a_pid, Duration::from_secs(5))
        .parse()
        .unwrap();
    a.kill().unwrap();
    a.wait().unwrap();
    let killed = Instant::now();
    let epoch_b: u64 = wait_for_file(&b_epoch, Duration::from_secs(15))
        .parse()
        .unwrap();
    let took = killed.elapsed();
    let _ = kill(Pid::from_raw(a_child), Signal::SIGKILL);
    assert!(
        took <= Duration::from_secs(3),
        "the standby took over after {took:?}"
    );
    assert!(epoch_b > epoch_a, "{epoch_a} then {epoch_b}");

    // SIGTERM goes to the command; when it exits, dlock resigns
    kill(
        Pid::from_raw(i32::try_from(b.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut b, Duration::from_secs(10)), 128 + 15);
    let after = output(url, &["leader", &name]);
    assert!(String::from_utf8_lossy(&after.stdout).contains("no leader"));
    assert_eq!(
        after.status.code(),
        Some(1),
        "no leader: exit 1, as test says false"
    );
}

/// `dlock leader --watch` prints the vacancy, each leader with its epoch, and the next
/// one after the first resigns; SIGTERM ends it cleanly.
fn leader_watch_follows_changes(url: &str) {
    let name = unique("watch");
    let (mut watcher, rx) = watch_leader(url, &name);
    let next = || {
        rx.recv_timeout(Duration::from_secs(15))
            .expect("a line from the watcher")
    };
    assert_eq!(next(), format!("{{\"name\":\"{name}\",\"leader\":null}}"));
    for v in ["first", "second"] {
        assert_eq!(
            code(url, &["elect", "--value", v, &name, "--", "sleep", "1"]),
            0
        );
    }
    let mut epochs = Vec::new();
    let end = Instant::now() + Duration::from_secs(15);
    while epochs.len() < 2 && Instant::now() < end {
        let line = next();
        for (i, v) in ["first", "second"].iter().enumerate() {
            let seen: serde_json::Value = serde_json::from_str(&line).unwrap();
            if seen["leader"]["value"] == *v && epochs.len() == i {
                let epoch = seen["leader"]["epoch"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{line}"));
                epochs.push(epoch);
            }
        }
    }
    assert_eq!(epochs.len(), 2, "the watcher saw both leaders: {epochs:?}");
    assert!(epochs[0] < epochs[1]);
    kill(
        Pid::from_raw(i32::try_from(watcher.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut watcher, Duration::from_secs(10)), 0);
}

/// `dlock run N2 N1 -- cmd` holds both (in sorted order, listed to the command); a run
/// that cannot have all of its names takes none of them.
fn several_names_are_held_as_one(url: &str) {
    let dir = scratch();
    let base = unique("multi");
    let (n1, n2, n3) = (
        format!("{base}/1"),
        format!("{base}/2"),
        format!("{base}/3"),
    );
    let listed = dir.join("names");
    let mut holder = spawn(
        url,
        &[
            "run",
            &n2,
            &n1,
            "--",
            "sh",
            "-c",
            &format!(
                "printf '%s\\n' \"$DLOCK_NAMES\" \"$DLOCK_TOKENS\" > {}; exec sleep 30",
                listed.display()
            ),
        ],
    );
    let text = wait_for_file(&listed, Duration::from_secs(15));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..2], [n1.as_str(), n2.as_str()], "{text}");
    assert_eq!(lines.len(), 4, "{text}");
    for n in [&n1, &n2] {
        assert_eq!(code(url, &["run", "--wait", "0", n, "--", "true"]), BUSY);
    }
    // n3 is free but n1 is not: nothing is kept
    assert_eq!(
        code(url, &["run", "--wait", "0", &n3, &n1, "--", "true"]),
        BUSY
    );
    assert_eq!(code(url, &["run", "--wait", "0", &n3, "--", "true"]), 0);
    kill(
        Pid::from_raw(i32::try_from(holder.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(10)), 128 + 15);
    assert_eq!(
        code(url, &["run", "--wait", "0", &n1, &n2, "--", "true"]),
        0
    );
}

/// `--max-hold` stops the command and frees the name; `--min-hold` keeps the name
/// blocked after a quick run and after a `kill -9`, until it has passed.
fn hold_limits(url: &str) {
    let dir = scratch();
    let name = unique("maxhold");
    let t = Instant::now();
    assert_eq!(
        code(
            url,
            &["run", "--max-hold", "500ms", &name, "--", "sleep", "30"]
        ),
        MAX_HOLD
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(code(url, &["run", "--wait", "0", &name, "--", "true"]), 0);

    // the run ends at once; its name stays blocked until 2 s after it was taken (a
    // backend that cannot cut a lease on the server keeps dlock running until then)
    let min_hold = Duration::from_secs(2);
    let name = unique("minhold");
    let ready = dir.join("ready");
    let mut quick = spawn(
        url,
        &run_sh(
            "--ttl 5s --min-hold 2s",
            &name,
            &format!("echo > {}", ready.display()),
        ),
    );
    wait_for_file(&ready, Duration::from_secs(15));
    // the command ran after the lock was taken: from here, min_hold less the
    // command's start-up and this poll's 20 ms must still be blocked
    let t = Instant::now();
    let slack = Duration::from_millis(150);
    let mut busy = 0;
    loop {
        match code(url, &["run", "--wait", "0", &name, "--", "true"]) {
            BUSY => busy += 1,
            0 => break,
            other => panic!("exit {other}"),
        }
        assert!(t.elapsed() < Duration::from_secs(30), "never freed");
        sleep(Duration::from_millis(100));
    }
    assert!(busy > 0, "the name was never seen blocked");
    assert!(
        t.elapsed() + slack >= min_hold,
        "freed after {:?}",
        t.elapsed()
    );
    assert_eq!(wait_exit(&mut quick, Duration::from_secs(10)), 0);

    let name = unique("minhold-kill9");
    let (mut holder, pid) = holder_writing(url, "--ttl 5s --min-hold 3s", &name, "$$", 30);
    let child: i32 = pid.parse().unwrap();
    let started = Instant::now();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
    assert_eq!(
        code(url, &["run", "--wait", "30s", "-q", &name, "--", "true"]),
        0
    );
    assert!(
        started.elapsed() >= Duration::from_secs(3) - Duration::from_millis(100),
        "freed {:?} after a kill -9, before --min-hold",
        started.elapsed()
    );
}

/// The CLI tests' URLs, with ZooKeeper's session following each run's TTL (a TTL of
/// 5 s is a 5 s session, a 3 s lease), not fixed by the URL.
fn url_of(backend: &str) -> String {
    match backend {
        "zookeeper" => format!("zk://{}", required_env("DLOCK_TEST_ZK_ADDR")),
        other => common::backend_url(other),
    }
}

common::every_backend!(urls: crate::url_of;
    elect_standby_takes_over_after_kill,
    leader_watch_follows_changes,
    several_names_are_held_as_one,
    hold_limits,
);
