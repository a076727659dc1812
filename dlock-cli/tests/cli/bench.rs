//! `dlock bench`: every scenario reported, the scale scenario's growth and plot, and
//! the raw floors of a push backend (Redis), the advisory-lock peer on PostgreSQL.

use dlock_conformance::required_env;

use crate::common::{output, scratch, scratch_sqlite, sqlite_in, succeeded};

/// `dlock bench --json ARGS` on `url` (ARGS: words split at spaces), which must
/// succeed: its JSON figures.
fn bench_json(url: &str, args: &str) -> String {
    let args: Vec<&str> = ["bench", "--json"]
        .into_iter()
        .chain(args.split_whitespace())
        .collect();
    succeeded(&output(url, &args))
}

/// The rest of the JSON figure `scenario` / `metric` after its metric (`"dlock":…,
/// "floor":…`), or a panic naming it.
fn figure<'a>(json: &'a str, scenario: &str, metric: &str) -> &'a str {
    json.split(&format!(
        "{{\"scenario\":\"{scenario}\",\"metric\":\"{metric}\""
    ))
    .nth(1)
    .and_then(|r| r.split('}').next())
    .unwrap_or_else(|| panic!("{scenario} {metric} missing: {json}"))
}

/// On a push backend the hand-off and contended scenarios have a raw floor too (a
/// blocking lock on the server's own wake-up), run in the same rounds.
#[cfg(feature = "server-tests")]
#[test]
fn bench_handoff_and_contention_have_floors_on_redis() {
    let url = required_env("DLOCK_TEST_REDIS_URL");
    let json = bench_json(
        &url,
        "--scenario handoff --scenario contended --trials 3 --duration 600ms --clients 3",
    );
    for (scenario, metric) in [("handoff", "p50 ms"), ("contended", "cycles/s")] {
        let row = figure(&json, scenario, metric);
        assert!(!row.contains("\"floor\":null"), "{scenario}: {json}");
    }
}

/// On PostgreSQL the uncontended, hand-off and contended scenarios also measure the
/// server's own advisory locks (the peer issue #34.2's targets are set against) in the
/// same rounds: each "vs peer" row carries dlock's figure and the peer's.
#[cfg(feature = "server-tests")]
#[test]
fn bench_measures_advisory_locks_as_the_peer_on_postgres() {
    let url = required_env("DLOCK_TEST_POSTGRES_URL");
    let json = bench_json(
        &url,
        "--scenario uncontended --scenario handoff --scenario contended \
         --cycles 30 --trials 3 --duration 600ms --clients 3",
    );
    assert!(json.contains("\"peer\":\"pg_advisory_lock"), "{json}");
    for (scenario, metric) in [
        ("uncontended", "cycle p50 ms vs peer"),
        ("handoff", "p50 ms vs peer"),
        ("contended", "cycles/s vs peer"),
    ] {
        let row = figure(&json, scenario, metric);
        let peer: f64 = row
            .split("\"floor\":")
            .nth(1)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{scenario} {metric}: no peer figure: {json}"));
        assert!(peer.is_finite() && peer >= 0.0, "{scenario}: {json}");
    }
}

/// `dlock bench --scenario scale` reports how costs grow with waiters, and what the
/// server keeps per name: SQLite keeps one row per name ever locked (the row carries
/// the name's fencing token, so it is never deleted).
#[test]
fn bench_scale_reports_growth() {
    let dir = scratch();
    let url = sqlite_in(&dir, "bench-scale.sqlite");
    let json = bench_json(
        &url,
        &format!(
            "--scenario scale --clients 3 --scale-waiters 10 --scale-held 0 \
             --scale-names 200 --plot-svg {}",
            dir.join("scale.svg").display()
        ),
    );
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
    let url = scratch_sqlite("bench.sqlite");
    let json = bench_json(
        &url,
        "--cycles 50 --trials 3 --duration 500ms --held-locks 20 --held-ttl 300ms \
         --clients 3 --parallel 4",
    );
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
