//! A `dlock run` that stops waiting — its `--wait` ran out, or a signal told it to stop
//! — takes its place in the queue with it before it exits: the waiter behind it gets
//! the lock as soon as the holder is done, not when the quitter's session or lease
//! runs out (ZooKeeper and etcd, the backends whose waiters queue on the server).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::zombie_processes)]

use std::process::Child;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{scratch, spawn, unique, wait_exit, wait_for_file};

/// A session or lease this long would keep a left-behind entry for far longer than
/// the hand-off bound below.
const TTL: &str = "20s";

fn url(backend: &str) -> String {
    use dlock_conformance::required_env;
    match backend {
        // no pinned session timeout: each TTL gets a session of its own length
        "zookeeper" => format!("zk://{}", required_env("DLOCK_TEST_ZK_ADDR")),
        "etcd" => format!(
            "etcd://{}",
            required_env("DLOCK_TEST_ETCD_ENDPOINTS").replace("http://", "")
        ),
        other => panic!("no such queue backend: {other}"),
    }
}

/// Holder A runs 6 s; B queues behind it (waiting `b_wait`) and quits (`quit` stops
/// it, or its wait runs out); C queues behind B. C must get the lock right after A is
/// done.
fn quitter_leaves_no_entry(
    backend: &str,
    b_wait: &str,
    quit: impl FnOnce(&mut Child) -> i32,
    expect: i32,
) {
    let url = url(backend);
    let dir = scratch();
    let name = unique("quitter");
    let (held, c_ran) = (dir.join("held"), dir.join("c-ran"));
    let mut a = spawn(
        &url,
        &[
            "run",
            "--ttl",
            TTL,
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo >> {}; sleep 6", held.display()),
        ],
    );
    wait_for_file(&held, Duration::from_secs(10));
    let mut b = spawn(
        &url,
        &["run", "--ttl", TTL, "--wait", b_wait, &name, "--", "true"],
    );
    sleep(Duration::from_millis(1500)); // B is queued before C
    let mut c = spawn(
        &url,
        &[
            "run",
            "--ttl",
            TTL,
            "--wait",
            "60s",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo >> {}", c_ran.display()),
        ],
    );
    sleep(Duration::from_millis(1000)); // C is queued behind B
    assert_eq!(quit(&mut b), expect, "how the quitter ended");
    assert_eq!(wait_exit(&mut a, Duration::from_secs(15)), 0);
    let a_done = Instant::now();
    wait_for_file(&c_ran, Duration::from_secs(60));
    let handed = a_done.elapsed();
    assert_eq!(wait_exit(&mut c, Duration::from_secs(10)), 0);
    // a left-behind entry would hold C back until it expired (~20 s)
    assert!(
        handed < Duration::from_secs(5),
        "{backend}: the waiter behind a quitter got the lock {handed:?} after the holder ended"
    );
}

fn times_out(b: &mut Child) -> i32 {
    wait_exit(b, Duration::from_secs(10))
}

fn sigterm(b: &mut Child) -> i32 {
    kill(
        Pid::from_raw(i32::try_from(b.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    wait_exit(b, Duration::from_secs(10))
}

#[test]
fn zookeeper_waiter_that_times_out_leaves_the_queue() {
    quitter_leaves_no_entry("zookeeper", "3s", times_out, 74);
}

#[test]
fn zookeeper_waiter_stopped_by_sigterm_leaves_the_queue() {
    quitter_leaves_no_entry("zookeeper", "60s", sigterm, 143);
}

#[test]
fn etcd_waiter_that_times_out_leaves_the_queue() {
    quitter_leaves_no_entry("etcd", "3s", times_out, 74);
}

#[test]
fn etcd_waiter_stopped_by_sigterm_leaves_the_queue() {
    quitter_leaves_no_entry("etcd", "60s", sigterm, 143);
}
