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
        m::HOLD_AGE,
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

/// Skips one JSON value at the start of `s` (after whitespace); returns the rest, or
/// `None` where `s` does not start with a valid value.
fn json_value(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let mut chars = s.chars();
    match chars.next()? {
        '{' | '[' => {
            let close = if s.starts_with('{') { '}' } else { ']' };
            let mut rest = s[1..].trim_start();
            if let Some(after) = rest.strip_prefix(close) {
                return Some(after);
            }
            loop {
                if close == '}' {
                    rest = json_value(rest)?.trim_start().strip_prefix(':')?; // a string key
                }
                rest = json_value(rest)?.trim_start();
                match rest.chars().next()? {
                    ',' => rest = &rest[1..],
                    c if c == close => return Some(&rest[1..]),
                    _ => return None,
                }
            }
        }
        '"' => {
            let mut escaped = false;
            for (i, c) in s.char_indices().skip(1) {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => return Some(&s[i + 1..]),
                    (false, c) if c.is_control() => return None,
                    _ => {}
                }
            }
            None
        }
        _ => {
            let end = s
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')))
                .unwrap_or(s.len());
            let word = &s[..end];
            (matches!(word, "true" | "false" | "null") || word.parse::<f64>().is_ok())
                .then_some(&s[end..])
        }
    }
}

#[test]
fn the_json_checker_refuses_broken_json() {
    for good in ["{}", "[1, 2.5, -3e2]", r#"{"a": [true, null, "x\"y"]}"#] {
        assert_eq!(json_value(good).map(str::trim), Some(""), "{good}");
    }
    for bad in ["{", r#"{"a" 1}"#, "[1,]", r#"{"a": tru}"#, "[1 2]"] {
        assert!(
            json_value(bad).is_none_or(|rest| !rest.trim().is_empty()),
            "{bad}"
        );
    }
}

/// Every panel's query parses as PromQL (promtool checks them as recording rules, with
/// Grafana's variables filled in) and reads only metrics dlock exports.
#[test]
fn dashboard_queries_parse_and_read_exported_metrics() {
    let json =
        std::fs::read_to_string(repo().join("contrib/grafana/dlock-dashboard.json")).unwrap();
    assert_eq!(
        json_value(&json).map(str::trim),
        Some(""),
        "the dashboard is not one valid JSON value"
    );
    for key in [
        "\"panels\"",
        "\"title\"",
        "\"templating\"",
        "\"schemaVersion\"",
    ] {
        assert!(json.contains(key), "no {key}: not a Grafana dashboard");
    }
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
    // a few renewals at ttl/3 once it holds
    let reply = poll(|| {
        let reply = try_scrape(&addr)?;
        reply.contains("dlock_renew_total").then_some(reply)
    });
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
        "# TYPE dlock_hold_age_seconds gauge",
        "dlock_hold_age_seconds{backend=\"sqlite\",lock=\"observed\"}",
    ] {
        assert!(body.contains(described), "no {described:?} in:\n{body}");
    }
    assert!(!body.contains("summary"), "{body}");
    promtool(&["check", "metrics"], body);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scrapes `addr` once; `None` while nothing listens there yet.
fn try_scrape(addr: &str) -> Option<String> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// `probe`'s first answer within 20 s (a loaded machine starts processes slowly).
fn poll(mut probe: impl FnMut() -> Option<String>) -> String {
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(std::time::Instant::now() < end, "nothing came within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let mut holder = run(&["run", "queue", "--", "sleep", "4"]);
    let held = || {
        Command::new(env!("CARGO_BIN_EXE_dlock"))
            .args(["status", "queue"])
            .env("DLOCK_URL", &url)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("held by"))
            .unwrap_or(false)
    };
    poll(|| held().then(String::new));
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
    let waiting = poll(|| try_scrape(&addr).filter(|s| s.contains("dlock_waiters")));
    assert!(
        waiting.contains("dlock_waiters{backend=\"sqlite\"} 1"),
        "the holder still holds for seconds, so its waiter must be counted: {waiting}"
    );
    let _ = holder.wait();
    // the waiter polls, then holds
    let holding = poll(|| try_scrape(&addr).filter(|s| s.contains("outcome=\"acquired\"} 1")));
    assert!(
        holding.contains("dlock_waiters{backend=\"sqlite\"} 0"),
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

/// `--metrics-textfile`: written while held (the hold's age there) and at exit, also
/// for a run that never got the lock; each version passes `promtool check metrics`. A
/// metrics port already taken is a warning, not a failed job.
#[test]
fn textfile_is_written_while_held_and_at_every_exit() {
    let dir = std::env::temp_dir().join(format!("dlock-textfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/locks.sqlite", dir.display());
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
