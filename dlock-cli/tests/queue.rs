//! The backends whose waiters queue on the server (ZooKeeper, etcd, Redis, SQL):
//! `dlock run` waiters get the lock in the order they came, and one that stops waiting
//! — its `--wait` ran out, or a signal told it to stop, or it was killed — takes its
//! place in the queue with it: the waiter behind it gets the lock as soon as the holder
//! is done, not when the quitter's session, lease or queue entry runs out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::zombie_processes)]

use std::process::Child;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{scratch, scratch_sqlite, spawn, unique, wait_exit, wait_for_file};

/// The queue backends, each case a test of its own per backend.
macro_rules! on_queue_backends {
    ($($case:ident),+ $(,)?) => {
        on_queue_backends!(@on redis, feature = "server-tests"; $($case),+);
        on_queue_backends!(@on redis_cluster, feature = "server-tests"; $($case),+);
        on_queue_backends!(@on etcd, all(feature = "etcd", feature = "server-tests"); $($case),+);
        on_queue_backends!(@on zookeeper, all(feature = "zookeeper", feature = "server-tests"); $($case),+);
        on_queue_backends!(@on sqlite, all(); $($case),+);
        on_queue_backends!(@on postgres, feature = "server-tests"; $($case),+);
        on_queue_backends!(@on mariadb, feature = "server-tests"; $($case),+);
    };
    (@on $backend:ident, $cfg:meta; $($case:ident),+) => {
        #[cfg($cfg)]
        mod $backend {
            $(
                #[test]
                fn $case() {
                    super::$case(stringify!($backend));
                }
            )+
        }
    };
}

on_queue_backends!(
    waiter_that_times_out_leaves_the_queue,
    waiter_stopped_by_sigterm_leaves_the_queue,
    waiters_run_in_the_order_they_came,
);

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
        "redis" => required_env("DLOCK_TEST_REDIS_URL"),
        "redis_cluster" => required_env("DLOCK_TEST_REDIS_CLUSTER_URL"),
        // the default backend: one database file shared by the test's processes;
        // its waiters (and MariaDB's) poll, and queue when asked (`fifo=true`)
        "sqlite" => scratch_sqlite("locks.sqlite?fifo=true"),
        "postgres" => required_env("DLOCK_TEST_POSTGRES_URL"),
        "mariadb" => format!("{}?fifo=true", required_env("DLOCK_TEST_MYSQL_URL")),
        other => panic!("no such queue backend: {other}"),
    }
}

/// `dlock run --ttl TTL [--wait WAIT] NAME -- sh -c SCRIPT`, running.
fn run_sh(url: &str, name: &str, wait: Option<&str>, script: &str) -> Child {
    let mut args = vec!["run", "--ttl", TTL];
    if let Some(w) = wait {
        args.extend(["--wait", w]);
    }
    args.extend([name, "--", "sh", "-c", script]);
    spawn(url, &args)
}

/// A holder of `name` that takes it at once, marks `held` and keeps it `secs` seconds;
/// returned once the mark is there.
fn holding(url: &str, name: &str, held: &std::path::Path, secs: u32) -> Child {
    let holder = run_sh(
        url,
        name,
        None,
        &format!("echo >> {}; sleep {secs}", held.display()),
    );
    wait_for_file(held, Duration::from_secs(10));
    holder
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
    let mut a = holding(&url, &name, &held, 6);
    let mut b = spawn(
        &url,
        &["run", "--ttl", TTL, "--wait", b_wait, &name, "--", "true"],
    );
    sleep(Duration::from_millis(1500)); // B is queued before C
    let mut c = run_sh(
        &url,
        &name,
        Some("60s"),
        &format!("echo >> {}", c_ran.display()),
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

fn sigkill(b: &mut Child) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    b.kill().unwrap();
    let status = b.wait().unwrap();
    128 + status.signal().expect("killed by a signal")
}

fn waiter_that_times_out_leaves_the_queue(backend: &str) {
    quitter_leaves_no_entry(backend, "3s", times_out, 74);
}

fn waiter_stopped_by_sigterm_leaves_the_queue(backend: &str) {
    quitter_leaves_no_entry(backend, "60s", sigterm, 143);
}

/// SIGKILL: no chance to leave, on the backends that pass over a dead waiter's entry at
/// once: Redis a queued waiter with no connection left listening on its channel,
/// PostgreSQL one whose LISTEN connection is gone, and polling waiters (SQLite, MySQL)
/// move their entry's deadline on every second at least, so a killed one's entry is
/// dropped that soon after its last attempt. (ZooKeeper and etcd drop the entry with
/// the session or lease, 20 s here: not what the hand-off bound is about.)
mod waiter_killed_while_queued_is_passed_over {
    macro_rules! on {
        ($($backend:ident),+) => {$(
            #[test]
            fn $backend() {
                super::quitter_leaves_no_entry(stringify!($backend), "60s", super::sigkill, 137);
            }
        )+};
    }
    on!(sqlite);
    #[cfg(feature = "server-tests")]
    mod on_servers {
        use super::super::{quitter_leaves_no_entry, sigkill};
        macro_rules! on {
            ($($backend:ident),+) => {$(
                #[test]
                fn $backend() {
                    quitter_leaves_no_entry(stringify!($backend), "60s", sigkill, 137);
                }
            )+};
        }
        on!(redis, redis_cluster, postgres);
    }
}

/// Six `dlock run` waiters that queue 300 ms apart behind a holder run one after
/// another in that order.
fn waiters_run_in_the_order_they_came(backend: &str) {
    const WAITERS: usize = 6;
    let url = url(backend);
    let dir = scratch();
    let name = unique("order");
    let (held, order) = (dir.join("held"), dir.join("order"));
    let mut holder = holding(&url, &name, &held, 4);
    let mut waiters: Vec<Child> = (0..WAITERS)
        .map(|i| {
            let w = run_sh(
                &url,
                &name,
                Some("60s"),
                &format!("echo {i} >> {}", order.display()),
            );
            sleep(Duration::from_millis(300));
            w
        })
        .collect();
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(15)), 0);
    for w in &mut waiters {
        assert_eq!(wait_exit(w, Duration::from_secs(30)), 0);
    }
    let ran: Vec<String> = std::fs::read_to_string(&order)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let expected: Vec<String> = (0..WAITERS).map(|i| i.to_string()).collect();
    assert_eq!(ran, expected, "{backend}: the waiters ran out of order");
}
