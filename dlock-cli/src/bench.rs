//! `dlock bench`: runs `dlock_bench` against the backend and prints its figures with
//! the ratio to the floor, as text or JSON.

use std::fmt::Write as _;
use std::process::ExitCode;

use dlock_bench::{Options, Report, Step};

use crate::cli::BenchArgs;
use crate::{exit, url};

pub async fn bench(args: BenchArgs) -> ExitCode {
    // Always recording, as a service exporting its metrics does: the figures include
    // what the instrumentation costs (its share is reported), printed only on request.
    let recorder = match crate::metrics::install() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("dlock: {e}");
            return ExitCode::from(exit::BACKEND);
        }
    };
    // the password filled in here: the floors and peers connect with their own
    // clients, which read the URL as it is
    let url = match url::resolve(args.backend.url.as_deref()).and_then(|u| {
        dlock_any::check_credentials(&u)?;
        dlock_any::with_password(&u)
    }) {
        Ok(u) => u,
        Err(e) => return exit::fail(&e),
    };
    // boxed: the run future carries every scenario's state
    let options = options(&args);
    let run = dlock_bench::run_with_progress(&url, &options, &progress);
    match Box::pin(run).await {
        Ok(report) => {
            if let Some(file) = &args.plot_svg {
                let title = format!("dlock bench on {}", report.url);
                if let Err(e) = std::fs::write(file, crate::bench_plot::bench_svg(&report, &title))
                {
                    eprintln!("dlock: cannot write {}: {e}", file.display());
                    return ExitCode::from(exit::USAGE);
                }
            }
            let mut out = if args.json {
                as_json(&report)
            } else {
                as_text(&report)
            };
            if args.metrics || args.metrics_svg.is_some() {
                let metrics = recorder.render();
                if let Some(file) = &args.metrics_svg {
                    let title = format!("dlock bench on {}", dlock_any::redact_url(&url));
                    if let Err(e) =
                        std::fs::write(file, crate::plot::dashboard_svg(&metrics, &title))
                    {
                        eprintln!("dlock: cannot write {}: {e}", file.display());
                        return ExitCode::from(exit::USAGE);
                    }
                }
                if args.metrics {
                    out.push('\n');
                    out.push_str(&metrics);
                }
            }
            if let Err(code) = crate::stdout::write(out.as_bytes()) {
                return code;
            }
            if let Some(left) = &report.left_behind {
                eprintln!("dlock bench: {left}");
            }
            if report.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                let names: Vec<&str> = report.failed.iter().map(|(s, _)| s.name()).collect();
                eprintln!(
                    "dlock bench: {} scenario(s) failed: {} (the others' figures are above)",
                    names.len(),
                    names.join(", ")
                );
                ExitCode::from(exit::BACKEND)
            }
        }
        Err(e) => exit::fail(&dlock_any::hide_password(e, &url)),
    }
}

/// Each scenario on stderr as it starts and ends, with its figures: a run takes
/// minutes, and a scenario that fails does not take the others' results with it.
fn progress(step: Step<'_>) {
    match step {
        Step::Started(s) => eprintln!("dlock bench: {} ...", s.name()),
        Step::Finished(s, figures, took) => {
            eprintln!(
                "dlock bench: {} done in {:.1} s",
                s.name(),
                took.as_secs_f64()
            );
            for f in figures {
                match f.floor {
                    Some(v) => eprintln!(
                        "  {:<26} {:>12.3}  floor {v:.3} ({:.2}x)",
                        f.metric,
                        f.dlock,
                        f.dlock / v
                    ),
                    None => eprintln!("  {:<26} {:>12.3}", f.metric, f.dlock),
                }
            }
        }
        Step::Failed(s, e) => eprintln!("dlock bench: {} FAILED: {e}", s.name()),
        _ => {}
    }
}

fn options(args: &BenchArgs) -> Options {
    Options {
        scenarios: args.scenario.clone(),
        duration: args.duration,
        cycles: args.cycles,
        trials: args.trials,
        clients: args.clients,
        parallel: args.parallel,
        held_locks: args.held_locks,
        held_ttl: args.held_ttl,
        floor: !args.no_floor,
        scale_waiters: args.scale_waiters,
        scale_held: args.scale_held,
        scale_names: args.scale_names,
    }
}

fn as_text(r: &Report) -> String {
    let mut out = format!("dlock bench: {} at {}\n", r.backend, r.url);
    if let Some(f) = r.floor {
        let _ = writeln!(out, "floor: {f}");
    }
    if let Some(p) = r.peer {
        let _ = writeln!(
            out,
            "peer: {p} (rows \"vs peer\": the peer's figure in the floor column)"
        );
    }
    if let Some(c) = r.server_count {
        let _ = writeln!(out, "server req/s: {c}");
    }
    let _ = writeln!(
        out,
        "{:<12} {:<26} {:>12} {:>12} {:>8}",
        "scenario", "metric", "dlock", "floor", "ratio"
    );
    for (s, e) in &r.failed {
        let _ = writeln!(out, "{:<12} FAILED: {e}", s.name());
    }
    for f in &r.figures {
        let (floor, ratio) = match f.floor {
            Some(v) => (format!("{v:.3}"), format!("{:.2}", f.dlock / v)),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "{:<12} {:<26} {:>12.3} {floor:>12} {ratio:>8}",
            f.scenario, f.metric, f.dlock
        );
    }
    out
}

fn as_json(r: &Report) -> String {
    let figures: Vec<serde_json::Value> = r
        .figures
        .iter()
        .map(|f| {
            serde_json::json!({
                "scenario": f.scenario,
                "metric": f.metric,
                "dlock": f.dlock,
                "floor": f.floor,
            })
        })
        .collect();
    let failed: Vec<serde_json::Value> = r
        .failed
        .iter()
        .map(|(s, e)| serde_json::json!({ "scenario": s.name(), "error": e }))
        .collect();
    let report = serde_json::json!({
        "backend": r.backend,
        "url": r.url,
        "floor": r.floor,
        "peer": r.peer,
        "figures": figures,
        "failed": failed,
        "left_behind": r.left_behind,
    });
    format!("{report}\n")
}
