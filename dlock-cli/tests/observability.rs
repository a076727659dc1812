//! The observability that ships with dlock, checked by Prometheus's own tool: the alert
//! rules and their unit tests (`contrib/prometheus`), the Grafana dashboard's queries
//! (`contrib/grafana`), and a live scrape of `dlock run --metrics-addr`.
//! `scripts/services` installs `promtool` (Debian's `prometheus` package).
#![cfg_attr(not(feature = "server-tests"), allow(dead_code, unused_imports))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

// The parts of this one test binary live in tests/observability/ (a crate root looks for
// `mod x;` beside itself, hence the `#[path]`s).
#[path = "observability/endpoint.rs"]
mod endpoint;
#[path = "observability/outputs.rs"]
mod outputs;
#[path = "observability/shipped.rs"]
mod shipped;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
