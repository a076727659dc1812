//! The `dlock` binary as a user runs it: real processes, real signals, real servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use dlock_conformance::required_env;

mod common;
use common::{alive, backend_url, output, scratch, spawn, unique, wait_exit, wait_for_file};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BUSY: i32 = 73;
const TIMEOUT: i32 = 74;
const LEASE_LOST: i32 = 75;
const UNAVAILABLE: i32 = 69;
const USAGE: i32 = 2;
const CANNOT_EXEC: i32 = 127;

fn token_of(url: &str, name: &str) -> u64 {
    let out = output(url, &["run", name, "--", "sh", "-c", "echo $DLOCK_TOKEN"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Two runs at once with `--wait 0`: one runs, the other exits BUSY within a second.
fn busy_run_exits_at_once(url: &str) {
    let dir = scratch();
    let name = unique("busy");
    let marker = dir.join("started");
    let mut holder = spawn(
        url,
        &[
            "run",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo $DLOCK_TOKEN > {}; sleep 3", marker.display()),
        ],
    );
    wait_for_file(&marker, Duration::from_secs(10));
    let t = Instant::now();
    let out = output(url, &["run", "--wait", "0", &name, "--", "true"]);
    assert_eq!(
        out.status.code(),
        Some(BUSY),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("is held by"));
    let out = output(url, &["run", "--wait", "300ms", &name, "--", "true"]);
    assert_eq!(out.status.code(), Some(TIMEOUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gave up waiting"));
    // -q: the exit code says it, stderr says nothing
    let out = output(url, &["run", "--wait", "300ms", "-q", &name, "--", "true"]);
    assert_eq!(out.status.code(), Some(TIMEOUT));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // without -q, a waiting run says who holds the lock
    let out = output(url, &["run", "--wait", "1200ms", &name, "--", "true"]);
    assert_eq!(out.status.code(), Some(TIMEOUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("waiting for {name}: held by")) && err.contains("(token "),
        "{err}"
    );
    assert_eq!(wait_exit(&mut holder, Duration::from_secs(10)), 0);
}

/// DLOCK_TOKEN strictly increases across runs.
fn tokens_increase_across_runs(url: &str) {
    let name = unique("tokens");
    let a = token_of(url, &name);
    let b = token_of(url, &name);
    let c = token_of(url, &name);
    assert!(a < b && b < c, "{a} {b} {c}");
}

/// `kill -9` of a holding dlock: the next run with --wait gets the lock within TTL + 2 s.
fn killed_holder_frees_within_ttl(url: &str) {
    let dir = scratch();
    let name = unique("kill9");
    let pidfile = dir.join("child.pid");
    let mut holder = spawn(
        url,
        &[
            "run",
            "--ttl",
            "2s",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {}; exec sleep 30", pidfile.display()),
        ],
    );
    let child_pid: i32 = wait_for_file(&pidfile, Duration::from_secs(10))
        .parse()
        .unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let t = Instant::now();
    let out = output(url, &["run", "--wait", "20s", "-q", &name, "--", "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t.elapsed()
    );
    let _ = kill(Pid::from_raw(child_pid), Signal::SIGKILL);
}

/// SIGSTOP a holder past its TTL: another run gets the lock with a higher token; on
/// SIGCONT the stopped dlock finds its lease lost, terminates its command and exits
/// LEASE_LOST.
fn stopped_holder_loses_lease(url: &str) {
    let dir = scratch();
    let name = unique("sigstop");
    let (pidfile, tok_a, tok_b) = (dir.join("a.pid"), dir.join("a.tok"), dir.join("b.tok"));
    let mut a = spawn(
        url,
        &[
            "run",
            "--ttl",
            "1s",
            "--grace",
            "2s",
            &name,
            "--",
            "sh",
            "-c",
            &format!(
                "echo $$ > {}; echo $DLOCK_TOKEN > {}; exec sleep 60",
                pidfile.display(),
                tok_a.display()
            ),
        ],
    );
    let child_pid: i32 = wait_for_file(&pidfile, Duration::from_secs(10))
        .parse()
        .unwrap();
    let token_a: u64 = wait_for_file(&tok_a, Duration::from_secs(5))
        .parse()
        .unwrap();
    let a_pid = Pid::from_raw(i32::try_from(a.id()).unwrap());
    kill(a_pid, Signal::SIGSTOP).unwrap();
    let out = output(
        url,
        &[
            "run",
            "--wait",
            "20s",
            "-q",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo $DLOCK_TOKEN > {}", tok_b.display()),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token_b: u64 = wait_for_file(&tok_b, Duration::from_secs(1))
        .parse()
        .unwrap();
    assert!(token_b > token_a, "{token_b} after {token_a}");
    kill(a_pid, Signal::SIGCONT).unwrap();
    assert_eq!(wait_exit(&mut a, Duration::from_secs(10)), LEASE_LOST);
    let end = Instant::now() + Duration::from_secs(3);
    while alive(child_pid) && Instant::now() < end {
        sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(child_pid),
        "the command of a holder that lost its lease must be stopped"
    );
}

/// `status` reports holder and token, as text and JSON.
fn status_reports_holder(url: &str) {
    let dir = scratch();
    let name = unique("status");
    let marker = dir.join("tok");
    let mut holder = spawn(
        url,
        &[
            "run",
            &name,
            "--",
            "sh",
            "-c",
            &format!("echo $DLOCK_TOKEN > {}; sleep 2", marker.display()),
        ],
    );
    let token = wait_for_file(&marker, Duration::from_secs(10));
    let out = output(url, &["status", &name, "cli/never-taken"]);
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
}

/// SIGTERM to dlock reaches the command; dlock exits with the command's status and
/// releases the lock.
fn signals_are_forwarded_and_lock_released(url: &str) {
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
fn exit_codes_pass_through(url: &str) {
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
    assert_eq!(
        output(url, &["run", "--wait", "0", &name, "--", "true"])
            .status
            .code(),
        Some(0)
    );
}

/// `--permits N`: N runs at once, the N+1st busy, another N refused as a usage error;
/// `--shared` runs overlap and keep `--exclusive` out; `status` lists the holders.
/// Redlock offers neither: a usage error that says so.
fn permits_and_shared_runs(url: &str) {
    let name = unique("permits");
    if url.starts_with("redlock") {
        let out = output(url, &["run", "--permits", "2", &name, "--", "true"]);
        assert_eq!(out.status.code(), Some(USAGE));
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not offer"));
        return;
    }
    let dir = scratch();
    let hold = |marker: &Path, flags: &[&str]| {
        let script = format!("echo $DLOCK_TOKEN > {}; sleep 4", marker.display());
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&[&name, "--", "sh", "-c", &script]);
        spawn(url, &args)
    };
    let (m1, m2) = (dir.join("p1"), dir.join("p2"));
    let mut h1 = hold(&m1, &["--permits", "2"]);
    let mut h2 = hold(&m2, &["--permits", "2"]);
    wait_for_file(&m1, Duration::from_secs(10));
    wait_for_file(&m2, Duration::from_secs(10));
    let code = |args: &[&str]| output(url, args).status.code();
    assert_eq!(
        code(&["run", "--permits", "2", "--wait", "0", &name, "--", "true"]),
        Some(BUSY)
    );
    let out = output(
        url,
        &["run", "--permits", "3", "--wait", "0", &name, "--", "true"],
    );
    assert_eq!(out.status.code(), Some(USAGE));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use with 2 permits"));
    // the plain lock of the same name is another lock
    assert_eq!(code(&["run", "--wait", "0", &name, "--", "true"]), Some(0));
    let text = String::from_utf8_lossy(&output(url, &["status", &name]).stdout).into_owned();
    assert!(text.contains("(semaphore): 2 of 2 permits held"), "{text}");
    let json =
        String::from_utf8_lossy(&output(url, &["status", "--json", &name]).stdout).into_owned();
    assert!(json.contains("\"semaphore\":{\"permits\":2"), "{json}");
    let (r1, r2) = (dir.join("r1"), dir.join("r2"));
    let mut reader = hold(&r1, &["--shared"]);
    wait_for_file(&r1, Duration::from_secs(10));
    let mut second = hold(&r2, &["--shared"]);
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

macro_rules! per_backend {
    ($backend:ident, $url:expr) => {
        per_backend!($backend, $url, all());
    };
    ($backend:ident, $url:expr, $cfg:meta) => {
        #[cfg($cfg)]
        mod $backend {
            fn url() -> String {
                $url
            }
            #[test]
            fn busy_run_exits_at_once() {
                super::busy_run_exits_at_once(&url());
            }
            #[test]
            fn tokens_increase_across_runs() {
                super::tokens_increase_across_runs(&url());
            }
            #[test]
            fn killed_holder_frees_within_ttl() {
                super::killed_holder_frees_within_ttl(&url());
            }
            #[test]
            fn stopped_holder_loses_lease() {
                super::stopped_holder_loses_lease(&url());
            }
            #[test]
            fn status_reports_holder() {
                super::status_reports_holder(&url());
            }
            #[test]
            fn signals_are_forwarded_and_lock_released() {
                super::signals_are_forwarded_and_lock_released(&url());
            }
            #[test]
            fn exit_codes_pass_through() {
                super::exit_codes_pass_through(&url());
            }
            #[test]
            fn permits_and_shared_runs() {
                super::permits_and_shared_runs(&url());
            }
        }
    };
}

per_backend!(sqlite, super::backend_url("sqlite"));
per_backend!(postgres, super::backend_url("postgres"));
per_backend!(mariadb, super::backend_url("mariadb"));
per_backend!(redis, super::backend_url("redis"));
per_backend!(etcd, super::backend_url("etcd"), feature = "etcd");
per_backend!(
    zookeeper,
    super::backend_url("zookeeper"),
    feature = "zookeeper"
);
per_backend!(redlock, super::backend_url("redlock"));

#[test]
fn default_url_is_an_sqlite_file_in_the_state_directory() {
    let state = scratch();
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .env_remove("DLOCK_URL")
        .env("XDG_STATE_HOME", &state)
        .args(["run", "default-url", "--", "sh", "-c", "echo $DLOCK_TOKEN"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(state.join("dlock/locks.sqlite").exists());
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
    let url = format!("sqlite://{}/locks.sqlite", dir.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
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

/// On a push backend the hand-off and contended scenarios have a raw floor too (a
/// blocking lock on the server's own wake-up), run in the same rounds.
#[test]
fn bench_handoff_and_contention_have_floors_on_redis() {
    let url = required_env("DLOCK_TEST_REDIS_URL");
    let out = output(
        &url,
        &[
            "bench",
            "--json",
            "--scenario",
            "handoff",
            "--scenario",
            "contended",
            "--trials",
            "3",
            "--duration",
            "600ms",
            "--clients",
            "3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout);
    for (scenario, metric) in [("handoff", "p50 ms"), ("contended", "cycles/s")] {
        let row = json
            .split(&format!(
                "{{\"scenario\":\"{scenario}\",\"metric\":\"{metric}\""
            ))
            .nth(1)
            .and_then(|r| r.split('}').next())
            .unwrap_or_else(|| panic!("{scenario} {metric} missing: {json}"));
        assert!(!row.contains("\"floor\":null"), "{scenario}: {json}");
    }
}

/// `dlock bench --scenario scale` reports how costs grow with waiters, and what the
/// server keeps per name: SQLite keeps one row per name ever locked (the row carries
/// the name's fencing token, so it is never deleted).
#[test]
fn bench_scale_reports_growth() {
    let dir = scratch();
    let url = format!("sqlite://{}/bench-scale.sqlite", dir.display());
    let out = output(
        &url,
        &[
            "bench",
            "--json",
            "--scenario",
            "scale",
            "--clients",
            "3",
            "--scale-waiters",
            "10",
            "--scale-held",
            "0",
            "--scale-names",
            "200",
            "--plot-svg",
            dir.join("scale.svg").to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout);
    for metric in [
        "waiters=1 hand-off ms",
        "waiters=10 hand-off ms",
        "names cycles/s",
    ] {
        assert!(
            json.contains(&format!("{{\"scenario\":\"scale\",\"metric\":\"{metric}\"")),
            "{metric}: {json}"
        );
    }
    assert!(
        json.contains("{\"scenario\":\"scale\",\"metric\":\"names records/1000\",\"dlock\":1000"),
        "one row per name: {json}"
    );
    assert!(
        !json.contains("waiters=100 "),
        "no more than --scale-waiters: {json}"
    );
    assert!(
        !json.contains("\"scenario\":\"uncontended\""),
        "only the scale scenario: {json}"
    );
    // the plot: the hand-off against the waiters (SQLite has no server request count
    // for the other costs), and no CDF (no scenario that times single operations ran)
    let svg = std::fs::read_to_string(dir.join("scale.svg")).unwrap();
    assert!(svg.contains("hand-off ms by waiters"), "{svg}");
    assert_eq!(svg.matches("<polyline").count(), 1, "{svg}");
    assert_eq!(svg.matches("<circle").count(), 2, "waiters=1 and 10: {svg}");
}

/// `dlock bench` runs every scenario and reports each figure, with the floor and its
/// ratio on the uncontended cycle.
#[test]
fn bench_reports_every_scenario() {
    let dir = scratch();
    let url = format!("sqlite://{}/bench.sqlite", dir.display());
    let out = output(
        &url,
        &[
            "bench",
            "--json",
            "--cycles",
            "50",
            "--trials",
            "3",
            "--duration",
            "500ms",
            "--held-locks",
            "20",
            "--held-ttl",
            "300ms",
            "--clients",
            "3",
            "--parallel",
            "4",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout);
    for (scenario, metric) in [
        ("uncontended", "cycle p50 ms"),
        ("handoff", "p50 ms"),
        ("contended", "cycles/s"),
        ("parallel", "cycles/s"),
        ("held", "renewals/s"),
        ("election", "observe p50 ms"),
        ("election", "failover p50 ms"),
    ] {
        assert!(
            json.contains(&format!(
                "{{\"scenario\":\"{scenario}\",\"metric\":\"{metric}\""
            )),
            "{scenario}: {json}"
        );
    }
    assert!(!json.contains("\"cycle p50 ms\",\"dlock\":0,"), "{json}");
    assert!(
        json.contains("\"metric\":\"cycle p50 ms\",\"dlock\":")
            && !json.contains("\"metric\":\"cycle p50 ms\",\"dlock\":NaN")
    );
    assert!(!json.contains("\"metric\":\"cycle p50 ms\",\"dlock\":null"));
    assert!(
        json.contains("\"floor\":0.") || json.contains("\"floor\":1."),
        "the sqlite floor ran: {json}"
    );
    let parallel = json
        .split("{\"scenario\":\"parallel\"")
        .nth(1)
        .and_then(|r| r.split('}').next())
        .unwrap_or_default();
    assert!(
        !parallel.contains("\"floor\":null") && !parallel.contains("\"floor\":0}"),
        "the parallel floor ran: {json}"
    );
}
