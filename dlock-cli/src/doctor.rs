//! `dlock doctor`: what decides whether locking on this backend is safe and fast.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use dlock_any::{Finding, LockName, Severity, redact_url};

use crate::cli::DoctorArgs;
use crate::{exit, url};

pub async fn doctor(args: DoctorArgs) -> ExitCode {
    let url = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => u,
        Err(e) => return exit::fail(&e),
    };
    let started = Instant::now();
    let lock = match dlock_any::connect(&url).await {
        Ok(l) => l,
        Err(e) => return exit::fail(&e),
    };
    let mut found = vec![Finding::info(
        "connect",
        format!("{} ms", started.elapsed().as_millis()),
    )];
    match round_trip(&*lock).await {
        Ok(rtt) => found.push(Finding::info(
            "round trip",
            format!(
                "{:.2} ms (median of 5 inspects)",
                rtt.as_secs_f64() * 1000.0
            ),
        )),
        Err(e) => return exit::fail(&e),
    }
    match lock.diagnose().await {
        Ok(more) => found.extend(more),
        Err(e) => return exit::fail(&e),
    }
    let out = if args.json {
        as_json(&found)
    } else {
        as_text(&redact_url(&url), &found)
    };
    if let Err(code) = crate::stdout::write(out.as_bytes()) {
        return code;
    }
    if found.iter().any(|f| f.severity == Severity::Critical) {
        return ExitCode::from(exit::GUARANTEE_BROKEN);
    }
    ExitCode::SUCCESS
}

/// The median time of five `inspect`s of a name nobody holds.
async fn round_trip(
    lock: &dyn dlock_any::DistributedLock,
) -> Result<Duration, dlock_any::LockError> {
    let name = LockName::new(&format!("dlock-doctor/{:016x}", dlock_any::random_u64()))?;
    let mut times = Vec::with_capacity(5);
    for _ in 0..5 {
        let t = Instant::now();
        lock.inspect(&name).await?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn as_text(url: &str, found: &[Finding]) -> String {
    let mut out = format!("dlock doctor: {url}\n");
    let width = found
        .iter()
        .map(|f| f.check.chars().count())
        .max()
        .unwrap_or(0);
    for f in found {
        let _ = writeln!(
            out,
            "  {:<8}  {:<width$}  {}",
            f.severity.to_string(),
            f.check,
            f.found
        );
        if !f.advice.is_empty() {
            let _ = writeln!(out, "  {:<8}  {:<width$}  → {}", "", "", f.advice);
        }
    }
    let count = |s| found.iter().filter(|f| f.severity == s).count();
    let (warnings, critical) = (count(Severity::Warning), count(Severity::Critical));
    let _ = writeln!(
        out,
        "{warnings} warning(s), {critical} critical{}",
        if critical > 0 {
            ": a guarantee is broken"
        } else {
            ""
        }
    );
    out
}

fn as_json(found: &[Finding]) -> String {
    let items: Vec<serde_json::Value> = found
        .iter()
        .map(|f| {
            serde_json::json!({
                "severity": f.severity.to_string().to_lowercase(),
                "check": f.check,
                "found": f.found,
                "advice": f.advice,
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(items))
}
