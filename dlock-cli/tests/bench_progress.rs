//! `dlock bench` tells each scenario on stderr as it starts and ends, with its figures,
//! and prints the whole report on stdout at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::output;

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
