//! What the CLI tests share: scratch directories, unique names, running `dlock`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

pub fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlock-cli-{:016x}", dlock_any::random_u64()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The URL of SQLite database `file` in `dir`.
pub fn sqlite_in(dir: &std::path::Path, file: &str) -> String {
    format!("sqlite://{}/{file}", dir.display())
}

/// The URL of SQLite database `file` in a new scratch directory.
pub fn scratch_sqlite(file: &str) -> String {
    sqlite_in(&scratch(), file)
}

pub fn unique(case: &str) -> String {
    format!("cli/{case}/{:016x}", dlock_any::random_u64())
}

pub fn dlock(url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlock"));
    c.env_remove("DLOCK_PASSWORD");
    c.env("DLOCK_URL", url).env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("dlock-cli-state"),
    );
    c
}

/// `dlock status --json NAME`'s one item (`held`, `token`, `remaining_ms`, `holder`…).
pub fn status_of(url: &str, name: &str) -> serde_json::Value {
    let out = output(url, &["status", "--json", name]);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    all[0].clone()
}

pub fn output(url: &str, args: &[&str]) -> Output {
    dlock(url).args(args).output().unwrap()
}

pub fn spawn(url: &str, args: &[&str]) -> Child {
    dlock(url)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `probe`'s first answer within 20 s (a loaded machine starts processes slowly).
pub fn poll(mut probe: impl FnMut() -> Option<String>) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < end, "nothing came within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The arguments of `dlock run FLAGS NAME -- sh -c SCRIPT` (`flags`: words split at
/// spaces).
pub fn run_sh<'a>(flags: &'a str, name: &'a str, script: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run"];
    args.extend(flags.split_whitespace());
    args.extend([name, "--", "sh", "-c", script]);
    args
}

/// `dlock run FLAGS NAME` whose command writes its token to `file`, run to its end.
pub fn token_to(url: &str, flags: &str, name: &str, file: &Path) -> Output {
    let script = format!("echo $DLOCK_TOKEN > {}", file.display());
    output(url, &run_sh(flags, name, &script))
}

/// A `dlock run FLAGS NAME` whose command writes `word` (a shell word: `$$` for its
/// pid, `$DLOCK_TOKEN`) to a file, then sleeps `hold_secs`: the running dlock, and what
/// the command wrote once it ran under the lock (within 15 s).
pub fn holder_writing(
    url: &str,
    flags: &str,
    name: &str,
    word: &str,
    hold_secs: u32,
) -> (Child, String) {
    let file = scratch().join("written");
    let script = format!("echo {word} > {}; exec sleep {hold_secs}", file.display());
    let child = spawn(url, &run_sh(flags, name, &script));
    (child, wait_for_file(&file, Duration::from_secs(15)))
}

/// A `dlock run` (with `flags`) of `name` holding it for `hold_secs`, and the file its
/// command writes `$DLOCK_TOKEN` to once it runs under the lock (see [`wait_for_file`]).
pub fn spawn_holder(url: &str, name: &str, flags: &[&str], hold_secs: u32) -> (Child, PathBuf) {
    let marker = scratch().join("token");
    let script = format!(
        "echo $DLOCK_TOKEN > {}; sleep {hold_secs}",
        marker.display()
    );
    let flags = flags.join(" ");
    (spawn(url, &run_sh(&flags, name, &script)), marker)
}

/// `out`'s stdout, after asserting that its command succeeded (its stderr otherwise).
pub fn succeeded(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A loopback address with a port nobody listens on (free a moment ago, and outside
/// the range outgoing connections borrow from).
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", dlock_conformance::free_port())
}

pub fn watch_leader(url: &str, name: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut watcher = dlock(url)
        .args(["leader", "--watch", "--json", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (watcher, rx)
}

/// Waits until `p` exists (a marker a command touched).
pub fn wait_for_path(p: &Path, within: Duration) {
    let end = Instant::now() + within;
    while !p.exists() {
        assert!(Instant::now() < end, "{} never appeared", p.display());
        sleep(Duration::from_millis(20));
    }
}

pub fn wait_for_file(p: &Path, within: Duration) -> String {
    let end = Instant::now() + within;
    loop {
        if let Ok(s) = std::fs::read_to_string(p)
            && s.ends_with('\n')
        {
            return s.trim().to_owned();
        }
        assert!(Instant::now() < end, "{} never appeared", p.display());
        sleep(Duration::from_millis(20));
    }
}

pub fn wait_exit(child: &mut Child, within: Duration) -> i32 {
    let end = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().expect("dlock exits, it is not killed");
        }
        assert!(Instant::now() < end, "dlock did not exit within {within:?}");
        sleep(Duration::from_millis(20));
    }
}

pub fn alive(pid: i32) -> bool {
    // a zombie still answers kill(0); its state in /proc says Z
    kill(Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// The URL of one of the backends every per-backend CLI test runs on (from the
/// `DLOCK_TEST_*` variables; a missing one fails under `CI=true`).
pub fn backend_url(backend: &str) -> String {
    use dlock_conformance::required_env;
    match backend {
        "sqlite" => scratch_sqlite("locks.sqlite"),
        "postgres" => required_env("DLOCK_TEST_POSTGRES_URL"),
        "mariadb" => required_env("DLOCK_TEST_MYSQL_URL"),
        "redis" => required_env("DLOCK_TEST_REDIS_URL"),
        "redis_sentinel" => required_env("DLOCK_TEST_REDIS_SENTINEL_URL"),
        "redis_cluster" => required_env("DLOCK_TEST_REDIS_CLUSTER_URL"),
        "etcd" => format!(
            "etcd://{}",
            required_env("DLOCK_TEST_ETCD_ENDPOINTS").replace("http://", "")
        ),
        "zookeeper" => format!(
            "zk://{}?session_timeout=1s",
            required_env("DLOCK_TEST_ZK_ADDR")
        ),
        "redlock" => format!(
            // shared test servers, started with the run and restarted by other tests:
            // no restart delay
            "redlock://{}?restart-delay=0s",
            required_env("DLOCK_TEST_REDLOCK_URLS").replace("redis://", "")
        ),
        other => panic!("no such backend: {other}"),
    }
}

/// One `#[test]` per CLI backend for each listed case — a `fn case(url: &str)` of the
/// test file — in a module named after the backend (`sqlite::case`, …); the etcd and
/// ZooKeeper ones only with their cargo features. The URLs are [`backend_url`]'s, or
/// `urls: f` (a `fn(&str) -> String` of the backend's name), on the seven backends or
/// those listed with `on: [..]`.
#[allow(unused_macros)] // not every test file runs its cases on every backend
macro_rules! every_backend {
    ($($case:ident),+ $(,)?) => {
        $crate::common::every_backend!(urls: $crate::common::backend_url,
            on: [sqlite, postgres, mariadb, redis, etcd, zookeeper, redlock]; $($case),+);
    };
    (urls: $urls:path; $($case:ident),+ $(,)?) => {
        $crate::common::every_backend!(urls: $urls,
            on: [sqlite, postgres, mariadb, redis, etcd, zookeeper, redlock]; $($case),+);
    };
    (urls: $urls:path, on: [$($backend:ident),+]; $($case:ident),+ $(,)?) => {
        $crate::common::every_backend!(@each [$($backend),+] $urls; [$($case),+]);
    };
    (@each [$first:ident $(, $rest:ident)*] $urls:path; $cases:tt) => {
        $crate::common::every_backend!(@on $first, $urls; $cases);
        $crate::common::every_backend!(@each [$($rest),*] $urls; $cases);
    };
    (@each [] $urls:path; $cases:tt) => {};
    (@on etcd, $urls:path; $cases:tt) => {
        #[cfg(all(feature = "etcd", feature = "server-tests"))]
        $crate::common::every_backend!(@mod etcd, $urls; $cases);
    };
    (@on zookeeper, $urls:path; $cases:tt) => {
        #[cfg(all(feature = "zookeeper", feature = "server-tests"))]
        $crate::common::every_backend!(@mod zookeeper, $urls; $cases);
    };
    (@on sqlite, $urls:path; $cases:tt) => {
        $crate::common::every_backend!(@mod sqlite, $urls; $cases);
    };
    (@on $backend:ident, $urls:path; $cases:tt) => {
        #[cfg(feature = "server-tests")]
        $crate::common::every_backend!(@mod $backend, $urls; $cases);
    };
    (@mod $backend:ident, $urls:path; [$($case:ident),+]) => {
        mod $backend {
            $(
                #[test]
                fn $case() {
                    super::$case(&$urls(stringify!($backend)));
                }
            )+
        }
    };
}
#[allow(unused_imports)] // not every test file runs its cases on every backend
pub(crate) use every_backend;
