//! `dlock bench`: the five scenarios against a backend, with the raw-protocol floor
//! measured in the same run, interleaved, and the ratio between them.

mod floor;
mod server_requests;

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockError, redact_url};
use tokio::time::Instant;

use crate::cli::{BenchArgs, Scenario};
use crate::{exit, json, url};
use dlock_cli::scenarios;
use dlock_cli::stats::Samples;

/// One reported figure.
struct Figure {
    scenario: &'static str,
    metric: &'static str,
    dlock: f64,
    floor: Option<f64>,
}

pub async fn bench(args: BenchArgs) -> ExitCode {
    let recorder = if args.metrics {
        match metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
            Ok(h) => Some(h),
            Err(e) => {
                eprintln!("dlock: cannot install the metrics recorder: {e}");
                return ExitCode::from(exit::BACKEND);
            }
        }
    } else {
        None
    };
    match run(&args).await {
        Ok(mut out) => {
            if let Some(h) = recorder {
                out.push('\n');
                out.push_str(&h.render());
            }
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::from(exit::BACKEND);
            }
            ExitCode::SUCCESS
        }
        Err(e) => exit::fail(&e),
    }
}

async fn connect_many(url: &str, n: usize) -> Result<Vec<Arc<dyn DistributedLock>>, LockError> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(dlock_any::connect(url).await?);
    }
    Ok(v)
}

/// The parallel scenario on the floor: `tasks` tasks, each cycling its own lock name
/// over the floor's shared connections.
async fn floor_parallel(
    floor: &dyn floor::Floor,
    tasks: usize,
    duration: Duration,
) -> Result<f64, LockError> {
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    let mut forks = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        forks.push(floor.fork().await.map_err(floor_error)?);
    }
    let end = Instant::now() + duration;
    for f in forks {
        let done = Arc::clone(&done);
        set.spawn(async move {
            while Instant::now() < end {
                f.cycle().await?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<(), String>(())
        });
    }
    for r in set.join_all().await {
        r.map_err(floor_error)?;
    }
    Ok(done.load(std::sync::atomic::Ordering::Relaxed) as f64 / duration.as_secs_f64())
}

fn floor_error(e: String) -> LockError {
    LockError::Backend {
        message: format!("floor: {e}"),
        source: None,
    }
}

async fn run(args: &BenchArgs) -> Result<String, LockError> {
    let url = url::resolve(args.backend.url.as_deref())?;
    let lock = dlock_any::connect(&url).await?;
    let floor = if args.no_floor {
        None
    } else {
        floor::for_url(&url)
            .await
            .transpose()
            .map_err(floor_error)?
    };
    let wants = |s: Scenario| args.scenario.is_empty() || args.scenario.contains(&s);
    let rounds: u32 = 3;
    let mut figures = Vec::new();
    let mut server_count: Option<&'static str> = None;

    if wants(Scenario::Uncontended) {
        // ours and the floor alternate in rounds, so both see the same machine load
        let per_round = (args.cycles / rounds as usize).max(10);
        let (mut ours, mut raw) = (Samples::default(), Samples::default());
        let (mut ours_time, mut raw_time) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            let t = Instant::now();
            ours.extend(scenarios::uncontended(&*lock, per_round).await?);
            ours_time += t.elapsed();
            if let Some(f) = &floor {
                let t = Instant::now();
                for i in 0..per_round + per_round / 10 {
                    let c = Instant::now();
                    f.cycle().await.map_err(floor_error)?;
                    if i >= per_round / 10 {
                        raw.push(c.elapsed());
                    }
                }
                raw_time += t.elapsed();
            }
        }
        let raw_some = |v: f64| floor.as_ref().map(|_| v);
        figures.push(Figure {
            scenario: "uncontended",
            metric: "cycle p50 ms",
            dlock: ours.percentile_ms(50.0),
            floor: raw_some(raw.percentile_ms(50.0)),
        });
        figures.push(Figure {
            scenario: "uncontended",
            metric: "cycle p99 ms",
            dlock: ours.percentile_ms(99.0),
            floor: raw_some(raw.percentile_ms(99.0)),
        });
        let rate = |n: usize, t: Duration| n as f64 * 1.1 / t.as_secs_f64();
        figures.push(Figure {
            scenario: "uncontended",
            metric: "cycles/s",
            dlock: rate(ours.len(), ours_time),
            floor: raw_some(rate(raw.len(), raw_time)),
        });
    }
    if wants(Scenario::Handoff) {
        let s = scenarios::handoff(
            dlock_any::connect(&url).await?,
            dlock_any::connect(&url).await?,
            args.trials,
        )
        .await?;
        figures.push(Figure {
            scenario: "handoff",
            metric: "p50 ms",
            dlock: s.percentile_ms(50.0),
            floor: None,
        });
        figures.push(Figure {
            scenario: "handoff",
            metric: "p99 ms",
            dlock: s.percentile_ms(99.0),
            floor: None,
        });
    }
    if wants(Scenario::Contended) {
        let c =
            scenarios::contended(connect_many(&url, args.clients).await?, args.duration).await?;
        figures.push(Figure {
            scenario: "contended",
            metric: "cycles/s",
            dlock: c.cycles_per_s,
            floor: None,
        });
        figures.push(Figure {
            scenario: "contended",
            metric: "p99 wait ms",
            dlock: c.waits.percentile_ms(99.0),
            floor: None,
        });
        figures.push(Figure {
            scenario: "contended",
            metric: "max wait ms",
            dlock: c.waits.max_ms(),
            floor: None,
        });
    }
    if wants(Scenario::Parallel) {
        // alternating rounds again, each a third of the duration
        let slice = args.duration / rounds;
        let (mut ours, mut raw) = (0.0, 0.0);
        for _ in 0..rounds {
            ours += scenarios::parallel(Arc::clone(&lock), args.parallel, slice).await?;
            if let Some(f) = &floor {
                raw += floor_parallel(&**f, args.parallel, slice).await?;
            }
        }
        figures.push(Figure {
            scenario: "parallel",
            metric: "cycles/s",
            dlock: ours / f64::from(rounds),
            floor: floor.as_ref().map(|_| raw / f64::from(rounds)),
        });
    }
    if wants(Scenario::Held) {
        let counter = server_requests::for_url(&url).await;
        server_count = counter.as_ref().map(|c| c.describe());
        let h = scenarios::held(
            Arc::clone(&lock),
            args.held_locks,
            args.held_ttl,
            counter.as_deref(),
        )
        .await?;
        figures.push(Figure {
            scenario: "held",
            metric: "locks",
            dlock: h.locks as f64,
            floor: None,
        });
        figures.push(Figure {
            scenario: "held",
            metric: "renewals/s",
            dlock: h.renewals_per_s,
            floor: None,
        });
        if let Some(r) = h.server_requests_per_s {
            figures.push(Figure {
                scenario: "held",
                metric: "server req/s",
                dlock: r,
                floor: None,
            });
        }
        figures.push(Figure {
            scenario: "held",
            metric: "RSS bytes/lock",
            dlock: h.rss_bytes_per_lock,
            floor: None,
        });
        figures.push(Figure {
            scenario: "held",
            metric: "CPU %",
            dlock: h.cpu_percent,
            floor: None,
        });
    }
    let shown = redact_url(&url);
    Ok(if args.json {
        as_json(&shown, lock.backend_name(), &figures)
    } else {
        as_text(
            &shown,
            lock.backend_name(),
            floor.as_deref(),
            server_count,
            &figures,
        )
    })
}

fn as_text(
    url: &str,
    backend: &str,
    floor: Option<&dyn floor::Floor>,
    server_count: Option<&str>,
    figures: &[Figure],
) -> String {
    let mut out = format!("dlock bench: {backend} at {url}\n");
    if let Some(f) = floor {
        let _ = writeln!(out, "floor: {}", f.describe());
    }
    if let Some(c) = server_count {
        let _ = writeln!(out, "server req/s: {c}");
    }
    let _ = writeln!(
        out,
        "{:<12} {:<16} {:>12} {:>12} {:>8}",
        "scenario", "metric", "dlock", "floor", "ratio"
    );
    for f in figures {
        let (floor, ratio) = match f.floor {
            Some(v) => (format!("{v:.3}"), format!("{:.2}", f.dlock / v)),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "{:<12} {:<16} {:>12.3} {floor:>12} {ratio:>8}",
            f.scenario, f.metric, f.dlock
        );
    }
    out
}

fn as_json(url: &str, backend: &str, figures: &[Figure]) -> String {
    let rows: Vec<String> = figures
        .iter()
        .map(|f| {
            let floor = f.floor.map_or("null".into(), |v| format!("{v}"));
            format!(
                "{{\"scenario\":{},\"metric\":{},\"dlock\":{},\"floor\":{floor}}}",
                json::string(f.scenario),
                json::string(f.metric),
                f.dlock
            )
        })
        .collect();
    format!(
        "{{\"backend\":{},\"url\":{},\"figures\":[{}]}}\n",
        json::string(backend),
        json::string(url),
        rows.join(",")
    )
}
