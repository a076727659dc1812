//! What ships in `contrib/`: the alert rules and their unit tests, and the Grafana
//! dashboard's queries, checked by `promtool` against the metrics dlock exports.

use super::{promtool, repo};

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

#[cfg(feature = "server-tests")]
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
#[cfg(feature = "server-tests")]
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
