//! `dlock bench` tells each scenario on stderr as it starts and ends, with its figures,
//! prints the whole report on stdout at the end, and leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{output, scratch};

#[test]
fn bench_reports_each_scenario_as_it_ends() {
    let out = output(
        "memory://",
        &[
            "bench",
            "--scenario",
            "uncontended,handoff",
            "--cycles",
            "200",
            "--trials",
            "5",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    for scenario in ["uncontended", "handoff"] {
        let started = err
            .find(&format!("dlock bench: {scenario} ..."))
            .expect(&err);
        let ended = err
            .find(&format!("dlock bench: {scenario} done in "))
            .expect(&err);
        assert!(started < ended, "{err}");
    }
    assert!(
        err.contains("cycle p50 ms"),
        "figures as they finish: {err}"
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("uncontended  cycle p50 ms") && table.contains("handoff"),
        "{table}"
    );
}

/// The tables of a SQLite file, as `sqlite3` lists them.
fn tables(file: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("sqlite3")
        .arg(file)
        .arg(".tables")
        .output()
        .expect("sqlite3 (scripts/services installs it)");
    assert!(out.status.success(), "{out:?}");
    let mut t: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    t.sort();
    t
}

/// On SQLite a run's thousands of names live in a table of the run's own, dropped at
/// the end with the floor's: after every default scenario the file holds the tables it
/// held before, and its own locks are untouched. (Fails on a bench that took its names in the user's table and
/// left the floor's table behind.)
#[test]
fn bench_on_sqlite_leaves_no_tables_or_rows_behind() {
    let file = scratch().join("bench.sqlite");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let out = output(&url, &["run", "mine", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let before = tables(&file);
    assert!(!before.is_empty());
    let rows = || {
        let out = std::process::Command::new("sqlite3")
            .arg(&file)
            .arg("SELECT name FROM dlock_locks")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rows_before = rows();
    let out = output(
        &url,
        // every default scenario (all but scale), each cut short
        &[
            "bench",
            "--cycles",
            "100",
            "--trials",
            "3",
            "--clients",
            "2",
            "--parallel",
            "4",
            "--duration",
            "500ms",
            "--held-locks",
            "200",
            "--held-ttl",
            "1s",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(tables(&file), before);
    assert_eq!(rows(), rows_before);
}
