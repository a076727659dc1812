//! Who gets the lock and when, on every backend: a busy name, increasing tokens, a
//! holder killed with `kill -9`, a holder stopped past its TTL.

use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{
    alive, holder_writing, output, run_sh, scratch, spawn, spawn_holder, succeeded, token_to,
    unique, wait_exit, wait_for_file,
};
use crate::{BUSY, LEASE_LOST, TIMEOUT};

fn token_of(url: &str, name: &str) -> u64 {
    let out = output(url, &["run", name, "--", "sh", "-c", "echo $DLOCK_TOKEN"]);
    succeeded(&out).trim().parse().unwrap()
}

/// Two runs at once with `--wait 0`: one runs, the other exits BUSY within a second.
pub(crate) fn busy_run_exits_at_once(url: &str) {
    let name = unique("busy");
    let (mut holder, marker) = spawn_holder(url, &name, &[], 3);
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
pub(crate) fn tokens_increase_across_runs(url: &str) {
    let name = unique("tokens");
    let a = token_of(url, &name);
    let b = token_of(url, &name);
    let c = token_of(url, &name);
    assert!(a < b && b < c, "{a} {b} {c}");
}

/// `kill -9` of a holding dlock: the next run with --wait gets the lock within TTL + 2 s.
pub(crate) fn killed_holder_frees_within_ttl(url: &str) {
    let name = unique("kill9");
    let (mut holder, pid) = holder_writing(url, "--ttl 2s", &name, "$$", 30);
    let child_pid: i32 = pid.parse().unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let t = Instant::now();
    let out = output(url, &["run", "--wait", "20s", "-q", &name, "--", "true"]);
    succeeded(&out);
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
pub(crate) fn stopped_holder_loses_lease(url: &str) {
    let dir = scratch();
    let name = unique("sigstop");
    let (pidfile, tok_a, tok_b) = (dir.join("a.pid"), dir.join("a.tok"), dir.join("b.tok"));
    let mut a = spawn(
        url,
        &run_sh(
            "--ttl 1s --grace 2s",
            &name,
            &format!(
                "echo $$ > {}; echo $DLOCK_TOKEN > {}; exec sleep 60",
                pidfile.display(),
                tok_a.display()
            ),
        ),
    );
    let child_pid: i32 = wait_for_file(&pidfile, Duration::from_secs(10))
        .parse()
        .unwrap();
    let token_a: u64 = wait_for_file(&tok_a, Duration::from_secs(5))
        .parse()
        .unwrap();
    let a_pid = Pid::from_raw(i32::try_from(a.id()).unwrap());
    kill(a_pid, Signal::SIGSTOP).unwrap();
    let out = token_to(url, "--wait 20s -q", &name, &tok_b);
    succeeded(&out);
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
