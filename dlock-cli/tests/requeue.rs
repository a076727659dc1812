//! `dlock elect --requeue`: a candidate that stands for good, restarting its command
//! each time it leads again. Real processes, real signals, real servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod common;
use common::{output, scratch, spawn, unique, wait_exit};

/// The log's lines, each `EPOCH VALUE PID`, once it has at least `n`.
fn leaderships(log: &Path, n: usize) -> Vec<(u64, String, i32)> {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<(u64, String, i32)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split(' ');
                Some((
                    f.next()?.parse().ok()?,
                    f.next()?.to_owned(),
                    f.next()?.parse().ok()?,
                ))
            })
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < end,
            "no leadership {n} within 30 s: {text}"
        );
        sleep(Duration::from_millis(20));
    }
}

/// Two `--requeue` candidates; the leader's command is killed (`kill -9`) three times
/// in a row. Each time its dlock resigns and campaigns again, the other leads and
/// restarts its command, with a higher epoch: four leaderships of two candidates
/// (without `--requeue` both would have exited after two kills). SIGUSR1 and SIGHUP
/// leave a standby standing; SIGTERM then ends each candidate, leading or standing by,
/// without a new campaign.
fn requeue_survives_three_command_kills(url: &str) {
    let (dir, name) = (scratch(), unique("requeue"));
    let log = dir.join("leaders.log");
    let script = format!(
        "echo \"$DLOCK_EPOCH $DLOCK_VALUE $$\" >> {}; exec sleep 60",
        log.display()
    );
    let mut candidates: Vec<_> = ["a", "b"]
        .iter()
        .map(|v| {
            let child = spawn(
                url,
                &[
                    "elect",
                    "--requeue",
                    "--ttl",
                    "3s",
                    "--value",
                    v,
                    &name,
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            );
            ((*v).to_owned(), child)
        })
        .collect();
    for kill_no in 1..=3 {
        let (_, _, pid) = leaderships(&log, kill_no).pop().unwrap();
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    }
    let led = leaderships(&log, 4);
    for pair in led.windows(2) {
        assert!(pair[1].0 > pair[0].0, "epochs must increase: {led:?}");
    }
    for (value, _) in &candidates {
        assert!(
            led.iter().filter(|l| &l.1 == value).count() >= 1,
            "{value} never led: {led:?}"
        );
    }
    // the candidate standing by first, then the leader: neither campaigns again
    let leader = led[3].1.clone();
    candidates.sort_by_key(|(v, _)| *v == leader);
    // a SIGUSR1 (or SIGHUP) has no command to go to while standing by: not a stop
    let standby = Pid::from_raw(i32::try_from(candidates[0].1.id()).unwrap());
    kill(standby, Signal::SIGUSR1).unwrap();
    kill(standby, Signal::SIGHUP).unwrap();
    sleep(Duration::from_millis(300));
    assert!(
        candidates[0].1.try_wait().unwrap().is_none(),
        "a standby ended on SIGUSR1 or SIGHUP"
    );
    for (value, child) in &mut candidates {
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        kill(pid, Signal::SIGTERM).unwrap();
        assert_eq!(
            wait_exit(child, Duration::from_secs(15)),
            128 + 15,
            "{value} ends on SIGTERM"
        );
    }
    let after = output(url, &["leader", &name]);
    assert!(
        String::from_utf8_lossy(&after.stdout).contains("no leader"),
        "{}",
        String::from_utf8_lossy(&after.stdout)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    for l in text.lines().skip(4) {
        // a fifth leadership may have begun before the signals; kill its command
        if let Some(pid) = l.rsplit(' ').next().and_then(|p| p.parse().ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

common::every_backend!(requeue_survives_three_command_kills,);
