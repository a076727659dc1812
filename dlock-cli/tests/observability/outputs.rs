//! The metrics dlock writes to files: `dlock bench --metrics-svg`'s panels, and
//! `--metrics-textfile` while held and at every exit.

use crate::common::sqlite_in;
use std::process::{Command, Stdio};

use super::promtool;
use crate::common::poll;

/// `dlock bench --metrics-svg` draws the dashboard's panels from the run's own metrics.
#[test]
fn bench_draws_the_dashboard_panels_as_svg() {
    let dir = std::env::temp_dir().join(format!("dlock-obs-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("panels.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .args([
            "bench",
            "--url",
            &sqlite_in(&dir, "bench.sqlite"),
            "--scenario",
            "uncontended",
            "--cycles",
            "50",
            "--trials",
            "1",
            "--no-floor",
            "--metrics-svg",
            svg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") && drawn.trim_end().ends_with("</svg>"));
    assert!(
        drawn.contains("try_acquire latency") && drawn.contains("<polyline"),
        "{drawn}"
    );
    assert!(
        drawn.contains("acquire acquired"),
        "the outcome bars: {drawn}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--metrics-textfile`: written while held (the hold's age there) and at exit, also
/// for a run that never got the lock; each version passes `promtool check metrics`. A
/// metrics port already taken is a warning, not a failed job.
#[cfg(feature = "server-tests")]
#[test]
fn textfile_is_written_while_held_and_at_every_exit() {
    let dir = std::env::temp_dir().join(format!("dlock-textfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = sqlite_in(&dir, "locks.sqlite");
    let (prom, skipped) = (dir.join("job.prom"), dir.join("skipped.prom"));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let dlock = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dlock"));
        c.args(args).env("DLOCK_URL", &url);
        c
    };
    let holder = dlock(&[
        "run",
        "--metrics-textfile",
        prom.to_str().unwrap(),
        "--metrics-addr",
        &taken_addr,
        "textfile-job",
        "--",
        "sleep",
        "2.5",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // the first write comes at once: the hold is there, its age counting
    let during = poll(|| {
        let text = std::fs::read_to_string(&prom).ok()?;
        text.contains("dlock_hold_age_seconds").then_some(text)
    });
    promtool(&["check", "metrics"], &during);
    let busy = dlock(&[
        "run",
        "--wait",
        "0",
        "-q",
        "--metrics-textfile",
        skipped.to_str().unwrap(),
        "textfile-job",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    assert_eq!(busy.status.code(), Some(73));
    let skip = std::fs::read_to_string(&skipped).unwrap();
    assert!(
        skip.contains("dlock_acquire_total{backend=\"sqlite\",outcome=\"busy\"} 1"),
        "{skip}"
    );
    promtool(&["check", "metrics"], &skip);
    let out = holder.wait_with_output().unwrap();
    assert!(out.status.success(), "a taken port must not fail the job");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot serve metrics"), "{err}");
    let after = std::fs::read_to_string(&prom).unwrap();
    assert!(
        after.contains("dlock_hold_age_seconds{backend=\"sqlite\",lock=\"textfile-job\"} 0"),
        "{after}"
    );
    assert!(after.contains("dlock_release_total{backend=\"sqlite\",outcome=\"released\"} 1"));
    promtool(&["check", "metrics"], &after);
    drop(taken);
    let _ = std::fs::remove_dir_all(&dir);
}
