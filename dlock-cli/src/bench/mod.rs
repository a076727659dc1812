//! `dlock bench`: the five scenarios against a backend, with the raw-protocol floor
//! measured in the same run, interleaved, and the ratio between them.

mod floor;
mod floor_wait;
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

/// The hand-off scenario on the raw blocking lock, where the backend has one: time
/// from the holder's release returning to the blocked waiter holding.
async fn floor_handoff(url: &str, trials: usize) -> Result<Option<Samples>, LockError> {
    let name = format!("{:016x}", dlock_any::random_u64());
    let Some(holder) = floor_wait::for_url(url, &name).await else {
        return Ok(None);
    };
    let holder = holder.map_err(floor_error)?;
    let waiter: Arc<dyn floor_wait::FloorWaiter> = Arc::from(
        floor_wait::for_url(url, &name)
            .await
            .ok_or_else(|| floor_error("no second floor client".into()))?
            .map_err(floor_error)?,
    );
    let mut s = Samples::default();
    for _ in 0..trials {
        holder.lock().await.map_err(floor_error)?;
        let w = Arc::clone(&waiter);
        let blocked = tokio::spawn(async move { w.lock().await.map(|()| Instant::now()) });
        tokio::time::sleep(Duration::from_millis(100 + dlock_any::random_u64() % 100)).await;
        holder.unlock().await.map_err(floor_error)?;
        let released = Instant::now();
        let at = blocked
            .await
            .map_err(|e| floor_error(e.to_string()))?
            .map_err(floor_error)?;
        s.push(at.saturating_duration_since(released));
        waiter.unlock().await.map_err(floor_error)?;
    }
    Ok(Some(s))
}

/// The contended scenario on the raw blocking lock: `clients` clients, each on its own
/// connection, on one name for `duration`. Cycles per second and each wait.
async fn floor_contended(
    url: &str,
    clients: usize,
    duration: Duration,
) -> Result<Option<(f64, Samples)>, LockError> {
    let name = format!("{:016x}", dlock_any::random_u64());
    let mut waiters = Vec::with_capacity(clients);
    for _ in 0..clients {
        match floor_wait::for_url(url, &name).await {
            Some(w) => waiters.push(w.map_err(floor_error)?),
            None => return Ok(None),
        }
    }
    let end = Instant::now() + duration;
    let mut set = tokio::task::JoinSet::new();
    for w in waiters {
        set.spawn(async move {
            let (mut cycles, mut waits) = (0u64, Samples::default());
            while Instant::now() < end {
                let t = Instant::now();
                w.lock().await?;
                waits.push(t.elapsed());
                if Instant::now() <= end {
                    cycles += 1;
                }
                w.unlock().await?;
            }
            Ok::<_, String>((cycles, waits))
        });
    }
    let (mut total, mut waits) = (0, Samples::default());
    for r in set.join_all().await {
        let (c, w) = r.map_err(floor_error)?;
        total += c;
        waits.extend(w);
    }
    Ok(Some((total as f64 / duration.as_secs_f64(), waits)))
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
        // alternating rounds: a third of the trials each, ours then the floor's
        let per_round = (args.trials / rounds as usize).max(3);
        let (mut ours, mut raw, mut has_raw) = (Samples::default(), Samples::default(), false);
        for _ in 0..rounds {
            ours.extend(
                scenarios::handoff(
                    dlock_any::connect(&url).await?,
                    dlock_any::connect(&url).await?,
                    per_round,
                )
                .await?,
            );
            if !args.no_floor
                && let Some(s) = floor_handoff(&url, per_round).await?
            {
                raw.extend(s);
                has_raw = true;
            }
        }
        let raw_some = |v: f64| has_raw.then_some(v);
        figures.push(Figure {
            scenario: "handoff",
            metric: "p50 ms",
            dlock: ours.percentile_ms(50.0),
            floor: raw_some(raw.percentile_ms(50.0)),
        });
        figures.push(Figure {
            scenario: "handoff",
            metric: "p99 ms",
            dlock: ours.percentile_ms(99.0),
            floor: raw_some(raw.percentile_ms(99.0)),
        });
    }
    if wants(Scenario::Contended) {
        let slice = args.duration / rounds;
        let (mut ours_cycles, mut ours_waits) = (0.0, Samples::default());
        let (mut raw_cycles, mut raw_waits, mut has_raw) = (0.0, Samples::default(), false);
        for _ in 0..rounds {
            let c = scenarios::contended(connect_many(&url, args.clients).await?, slice).await?;
            ours_cycles += c.cycles_per_s;
            ours_waits.extend(c.waits);
            if !args.no_floor
                && let Some((cycles, waits)) = floor_contended(&url, args.clients, slice).await?
            {
                raw_cycles += cycles;
                raw_waits.extend(waits);
                has_raw = true;
            }
        }
        let raw_some = |v: f64| has_raw.then_some(v);
        figures.push(Figure {
            scenario: "contended",
            metric: "cycles/s",
            dlock: ours_cycles / f64::from(rounds),
            floor: raw_some(raw_cycles / f64::from(rounds)),
        });
        figures.push(Figure {
            scenario: "contended",
            metric: "p99 wait ms",
            dlock: ours_waits.percentile_ms(99.0),
            floor: raw_some(raw_waits.percentile_ms(99.0)),
        });
        figures.push(Figure {
            scenario: "contended",
            metric: "max wait ms",
            dlock: ours_waits.max_ms(),
            floor: raw_some(raw_waits.max_ms()),
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
