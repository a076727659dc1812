//! One benchmark run: the chosen scenarios against a backend, each with its
//! raw-protocol floor measured in the same run, interleaved.

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockError, redact_url};
use tokio::time::Instant;

use crate::floor_runs::{floor_error, floor_parallel};
use crate::process::CpuClock;
use crate::report::{Distribution, Figure, Options, Report, Scenario, Step, Steps};
use crate::stats::Samples;
use crate::{
    election_runs, floor, peer, scale_runs, scenarios, server_requests, shared_runs, wait_runs,
};

/// Runs the scenarios `args` asks for against `url`, each next to its floor.
///
/// # Errors
/// Connecting to the backend or its floor; a scenario that fails is reported in
/// [`Report::failed`] and the others still run.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn run(url: &str, args: &Options) -> Result<Report, LockError> {
    run_with_progress(url, args, &|_| {}).await
}

/// [`run`], telling `progress` as each scenario starts and ends. What the run created
/// on the server is removed at its end, failed or not ([`crate::scratch`]).
///
/// # Errors
/// As [`run`].
///
/// # Cancel safety
/// As [`run`]; dropped, it leaves what it created (a SQL run's table).
pub async fn run_with_progress(
    url: &str,
    args: &Options,
    progress: &(dyn Fn(Step<'_>) + Sync),
) -> Result<Report, LockError> {
    let scratch = crate::scratch::Scratch::for_url(url);
    let ran = run_scenarios(scratch.url(), args, progress).await;
    let left_behind = scratch.clean(args.floor).await.err();
    ran.map(|r| Report {
        url: redact_url(url),
        left_behind,
        ..r
    })
}

/// The scenarios on `url` (the run's own, see [`crate::scratch`]).
async fn run_scenarios(
    url: &str,
    args: &Options,
    progress: &(dyn Fn(Step<'_>) + Sync),
) -> Result<Report, LockError> {
    let url = url.to_owned();
    let lock = dlock_any::connect(&url).await?;
    let floor = if !args.floor {
        None
    } else {
        floor::for_url(&url)
            .await
            .transpose()
            .map_err(floor_error)?
    };
    let floor_described = floor.as_ref().map(|f| f.describe());
    // the peer's rounds follow the floor's in each round (the floor's follow ours), so
    // all three see the same machine load
    let peer_described = if args.floor {
        peer::describe(&url)
    } else {
        None
    };
    let wants =
        |s: Scenario| (args.scenarios.is_empty() && s.by_default()) || args.scenarios.contains(&s);
    let rounds: u32 = 3;
    let round = wait_runs::Round {
        url: &url,
        args,
        rounds,
        peer: peer_described.is_some(),
    };
    let mut figures = Vec::new();
    let mut distributions = Vec::new();
    let mut server_count: Option<&'static str> = None;
    let mut steps = Steps::new(progress);

    if wants(Scenario::Uncontended) {
        let at = steps.start(Scenario::Uncontended, figures.len());
        let done = async {
            // ours and the floor alternate in rounds, so both see the same machine load
            let per_round = (args.cycles / rounds as usize).max(10);
            let (mut ours, mut raw) = (Samples::default(), Samples::default());
            let mut theirs = Samples::default();
            let (mut ours_time, mut raw_time) = (Duration::ZERO, Duration::ZERO);
            // the client's CPU per cycle, dlock's and the floor's
            let (mut ours_cpu, mut raw_cpu) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..rounds {
                let (t, cpu) = (Instant::now(), CpuClock::now());
                ours.extend(scenarios::uncontended(&*lock, per_round).await?);
                ours_time += t.elapsed();
                ours_cpu += cpu.elapsed();
                if let Some(f) = &floor {
                    let (t, cpu) = (Instant::now(), CpuClock::now());
                    for i in 0..per_round + per_round / 10 {
                        let c = Instant::now();
                        f.cycle().await.map_err(floor_error)?;
                        if i >= per_round / 10 {
                            raw.push(c.elapsed());
                        }
                    }
                    raw_time += t.elapsed();
                    raw_cpu += cpu.elapsed();
                }
                if peer_described.is_some()
                    && let Some(s) = peer::uncontended(&url, per_round).await?
                {
                    theirs.extend(s);
                }
            }
            let raw_some = |v: f64| floor.as_ref().map(|_| v);
            distributions.push(Distribution::of("uncontended", "cycle", &ours, Some(&raw)));
            figures.extend(Figure::p50_p99(
                "uncontended",
                ["cycle p50 ms", "cycle p99 ms"],
                &ours,
                floor.as_ref().map(|_| &raw),
            ));
            figures.extend(peer::versus(
                peer_described.is_some(),
                "uncontended",
                "cycle p50 ms vs peer",
                ours.percentile_ms(50.0),
                &theirs,
                &|s| s.percentile_ms(50.0),
            ));
            let rate = |n: usize, t: Duration| n as f64 * 1.1 / t.as_secs_f64();
            figures.push(Figure {
                scenario: "uncontended",
                metric: "cycles/s",
                dlock: rate(ours.len(), ours_time),
                floor: raw_some(rate(raw.len(), raw_time)),
            });
            // each side ran its cycles plus a tenth to warm up
            let per_cycle = |cpu: Duration, n: usize| cpu.as_secs_f64() * 1e6 / (n as f64 * 1.1);
            let ours_us = per_cycle(ours_cpu, ours.len());
            figures.push(Figure {
                scenario: "uncontended",
                metric: "client CPU µs/cycle",
                dlock: ours_us,
                floor: raw_some(per_cycle(raw_cpu, raw.len())),
            });
            // The spans and metrics cost the same CPU whatever the backend: measured where
            // nothing else costs anything (the in-memory backend, many cycles), against
            // this backend's cycle (the same backend with and without it differ by less
            // than the noise of a few thousand cycles over the network).
            let instrumentation_us = crate::scenarios::instrumentation_cost().await?;
            figures.push(Figure {
                scenario: "uncontended",
                metric: "instrumentation µs/cycle",
                dlock: instrumentation_us,
                floor: None,
            });
            figures.push(Figure {
                scenario: "uncontended",
                metric: "instrumentation % CPU",
                dlock: if ours_us > 0.0 {
                    100.0 * instrumentation_us / ours_us
                } else {
                    0.0
                },
                floor: None,
            });
            Ok::<(), LockError>(())
        }
        .await;
        steps.end(Scenario::Uncontended, at, done, &figures);
    }
    if wants(Scenario::Handoff) {
        let at = steps.start(Scenario::Handoff, figures.len());
        let done = wait_runs::handoff(&round, &mut figures, &mut distributions).await;
        steps.end(Scenario::Handoff, at, done, &figures);
    }
    if wants(Scenario::Contended) {
        let at = steps.start(Scenario::Contended, figures.len());
        let done = wait_runs::contended(&round, &mut figures, &mut distributions).await;
        steps.end(Scenario::Contended, at, done, &figures);
    }
    if wants(Scenario::Parallel) {
        let at = steps.start(Scenario::Parallel, figures.len());
        let done = async {
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
            Ok::<(), LockError>(())
        }
        .await;
        steps.end(Scenario::Parallel, at, done, &figures);
    }
    if wants(Scenario::Held) {
        let run = async {
            let counter = server_requests::for_url(&url).await;
            server_count = counter.as_ref().map(|c| c.describe());
            let held = Arc::clone(&lock);
            let h = scenarios::held(held, args.held_locks, args.held_ttl, counter.as_deref());
            Ok(h.await?.figures())
        };
        steps
            .run_figures(Scenario::Held, &mut figures, Box::pin(run))
            .await;
    }
    let shared = lock.capabilities().shared;
    if shared && wants(Scenario::Semaphore) {
        let (cycles, trials, clients) = (args.cycles, args.trials, args.clients);
        let run = shared_runs::semaphore(
            &url,
            floor.as_deref(),
            cycles,
            trials,
            clients,
            args.duration,
        );
        steps
            .run_figures(Scenario::Semaphore, &mut figures, Box::pin(run))
            .await;
    }
    if shared && wants(Scenario::RwLock) {
        let (cycles, clients) = (args.cycles, args.clients);
        let run = shared_runs::rwlock(&url, floor.as_deref(), cycles, clients, args.duration);
        steps
            .run_figures(Scenario::RwLock, &mut figures, Box::pin(run))
            .await;
    }
    if wants(Scenario::Election) {
        let run = election_runs::election(&url, args.floor, args.trials);
        steps
            .run_figures(Scenario::Election, &mut figures, Box::pin(run))
            .await;
    }
    if wants(Scenario::Scale) {
        let run = async {
            let counter = server_requests::for_url(&url).await;
            server_count = server_count.or(counter.as_ref().map(|c| c.describe()));
            scale_runs::scale(&url, &lock, args, counter.as_deref()).await
        };
        steps
            .run_figures(Scenario::Scale, &mut figures, Box::pin(run))
            .await;
    }
    let backend = lock.backend_name();
    drop((lock, floor));
    Ok(Report {
        backend,
        url: redact_url(&url),
        floor: floor_described,
        peer: peer_described,
        server_count,
        figures,
        distributions,
        failed: steps.failed,
        left_behind: None,
    })
}
