//! The observability that ships with dlock, checked by Prometheus's own tool: the alert
//! rules and their unit tests (`contrib/prometheus`), the Grafana dashboard's queries
//! (`contrib/grafana`), and a live scrape of `dlock run --metrics-addr`.
//! `scripts/services` installs `promtool` (Debian's `prometheus` package).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `promtool args...` with `stdin`; panics with its output unless it succeeds.
fn promtool(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is missing: run `scripts/test`, or apt-get install prometheus");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// Every metric dlock exports, as Prometheus names them.
fn exported() -> Vec<&'static str> {
    use dlock_any::metric_names as m;
    vec![
        m::ACQUIRE_LATENCY,
        m::ACQUIRE_WAIT,
        m::ACQUIRE_TOTAL,
        m::RENEW_TOTAL,
        m::RELEASE_TOTAL,
        m::HOLD,
        m::LEASES_LOST,
        m::GUARDS_DROPPED,
        m::WAITERS,
    ]
}

/// The `dlock_…` series a PromQL query reads, without histogram suffixes.
fn metrics_in(expr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("dlock_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        found.push(base.to_owned());
        rest = &tail[end..];
    }
    found
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    promtool(
        &["check", "rules", "contrib/prometheus/dlock-alerts.yml"],
        "",
    );
    let out = promtool(
        &["test", "rules", "contrib/prometheus/dlock-alerts.test.yml"],
        "",
    );
    assert!(out.contains("SUCCESS"), "{out}");
    let rules =
        std::fs::read_to_string(repo().join("contrib/prometheus/dlock-alerts.yml")).unwrap();
    for metric in metrics_in(&rules) {
        assert!(
            exported().contains(&metric.as_str()),
            "the rules read {metric}, which dlock does not export"
        );
    }
}

/// The dashboard's JSON strings named `expr`, unescaped.
fn dashboard_exprs(json: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut rest = json;
    while let Some(i) = rest.find("\"expr\": \"") {
        let mut expr = String::new();
        let mut chars = rest[i + 9..].chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => expr.extend(chars.next()),
                c => expr.push(c),
            }
        }
        rest = &rest[i + 9 + expr.len()..];
        exprs.push(expr);
    }
    exprs
}

/// Every panel's query parses as PromQL (promtool checks them as recording rules, with
/// Grafana's variables filled in) and reads only metrics dlock exports.
#[test]
fn dashboard_queries_parse_and_read_exported_metrics() {
    let json =
        std::fs::read_to_string(repo().join("contrib/grafana/dlock-dashboard.json")).unwrap();
    assert!(json.contains("\"panels\""), "not a dashboard");
    let exprs = dashboard_exprs(&json);
    assert!(exprs.len() >= 7, "{exprs:?}");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let metrics = metrics_in(e);
        assert!(!metrics.is_empty(), "{e}");
        for m in metrics {
            assert!(
                exported().contains(&m.as_str()),
                "the dashboard reads {m}: {e}"
            );
        }
        let filled = e
            .replace("$__rate_interval", "5m")
            .replace("$backend", ".*");
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: '{}'\n",
            filled.replace('\'', "''")
        ));
    }
    let file = std::env::temp_dir().join(format!("dlock-dashboard-{}.yml", std::process::id()));
    std::fs::write(&file, rules).unwrap();
    promtool(&["check", "rules", file.to_str().unwrap()], "");
    let _ = std::fs::remove_file(&file);
}

/// What `dlock run --metrics-addr` serves passes `promtool check metrics`: every metric
/// described, latencies as histograms (not summaries), the waiters gauge there.
#[test]
fn live_scrape_passes_promtool_check_metrics() {
    let dir = std::env::temp_dir().join(format!("dlock-obs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .args([
            "run",
            "--ttl",
            "300ms",
            "--metrics-addr",
            &addr,
            "observed",
            "--",
            "sleep",
            "1.5",
        ])
        .env(
            "DLOCK_URL",
            format!("sqlite://{}/locks.sqlite", dir.display()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800)); // a few renewals at ttl/3
    let mut conn = std::net::TcpStream::connect(&addr).expect("metrics endpoint");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let _ = holder.wait();
    for described in [
        "# HELP dlock_acquire_total ",
        "# HELP dlock_renew_total ",
        "# HELP dlock_waiters ",
        "# TYPE dlock_waiters gauge",
        "# HELP dlock_acquire_wait_seconds ",
        "# TYPE dlock_acquire_wait_seconds histogram",
        "dlock_acquire_wait_seconds_bucket{backend=\"sqlite\",le=\"0.00005\"}",
        "dlock_acquire_wait_seconds_bucket{backend=\"sqlite\",le=\"60\"}",
    ] {
        assert!(body.contains(described), "no {described:?} in:\n{body}");
    }
    assert!(!body.contains("summary"), "{body}");
    promtool(&["check", "metrics"], body);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scrapes `addr` once.
fn scrape(addr: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).expect("metrics endpoint");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    reply
}

/// `dlock_waiters` counts an `acquire` while it waits, and not after it got the lock.
#[test]
fn waiters_gauge_counts_a_blocked_acquire() {
    let dir = std::env::temp_dir().join(format!("dlock-obs-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/locks.sqlite", dir.display());
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dlock"))
            .args(args)
            .env("DLOCK_URL", &url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut holder = run(&["run", "queue", "--", "sleep", "2"]);
    std::thread::sleep(Duration::from_millis(500));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut waiter = run(&[
        "run",
        "--wait",
        "30s",
        "--metrics-addr",
        &addr,
        "queue",
        "--",
        "sleep",
        "2",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    let waiting = scrape(&addr);
    assert!(
        waiting.contains("dlock_waiters{backend=\"sqlite\"} 1"),
        "{waiting}"
    );
    let _ = holder.wait();
    std::thread::sleep(Duration::from_millis(1000)); // the waiter polls, then holds
    let holding = scrape(&addr);
    assert!(
        holding.contains("dlock_waiters{backend=\"sqlite\"} 0")
            && holding.contains("dlock_acquire_total{backend=\"sqlite\",outcome=\"acquired\"} 1"),
        "{holding}"
    );
    let _ = waiter.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

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
            &format!("sqlite://{}/bench.sqlite", dir.display()),
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
