//! `dlock bench`: runs `dlock_bench` against the backend and prints its figures with
//! the ratio to the floor, as text or JSON.

use std::fmt::Write as _;
use std::process::ExitCode;

use dlock_bench::{Options, Report};

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
    let url = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => u,
        Err(e) => return exit::fail(&e),
    };
    // boxed: the run future carries every scenario's state
    match Box::pin(dlock_bench::run(&url, &options(&args))).await {
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
            match crate::stdout::write(out.as_bytes()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(code) => code,
            }
        }
        Err(e) => exit::fail(&e),
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
    if let Some(c) = r.server_count {
        let _ = writeln!(out, "server req/s: {c}");
    }
    let _ = writeln!(
        out,
        "{:<12} {:<26} {:>12} {:>12} {:>8}",
        "scenario", "metric", "dlock", "floor", "ratio"
    );
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
    let report = serde_json::json!({ "backend": r.backend, "url": r.url, "figures": figures });
    format!("{report}\n")
}
