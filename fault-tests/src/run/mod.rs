//! One run: workers, a fenced store, one fault, a verdict.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FaultProxy, url_host_port};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::sleep;

use crate::backends::Backend;
use crate::checker::{Verdict, check_as, check_history, check_once};
use crate::clock::FakeClock;
use crate::evidence::{WallClockWatch, describe};
use crate::nemesis::{Nemesis, services};
use crate::own_store::OwnStore;
use crate::own_store::counter::counter_key;
use crate::store::{FencedStore, Kind};
use crate::workload::Workload;

mod apply;
mod clocks;
mod victims;

use apply::apply;
use clocks::{clock_for, preloaded, restore_clock, step_clock};
use victims::takeover;

/// How a run is shaped.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The worker binary (`dlock-fault-worker`).
    pub worker: PathBuf,
    /// `scripts/services`.
    pub services: PathBuf,
    /// Worker processes.
    pub workers: u32,
    /// Lease TTL (ZooKeeper: the session timeout in its URL).
    pub ttl: Duration,
    /// Time a holder spends between its read and its write.
    pub hold: Duration,
    /// How long the workers run before the fault: time to connect and settle into
    /// taking turns.
    pub warmup: Duration,
    /// Length of the run.
    pub duration: Duration,
    /// Whether the store checks fencing tokens.
    pub fenced: bool,
    /// What the workers take: the mutex, a semaphore's permit, a read-write lock.
    pub workload: Workload,
}

/// What one run found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The checker's verdict.
    pub verdict: Verdict,
    /// Time from the fault to the next acquisition by a worker other than its victim.
    pub recovery: Option<Duration>,
    /// Whether the fault could be applied (a holder was found, the services answered).
    pub applied: bool,
    /// How far the machine's wall clock moved against its monotonic clock during the
    /// run (see [`crate::evidence::WallClockWatch`]).
    pub wall_clock_moved: Duration,
    /// For a run that broke what the backend promises under the fault: what the
    /// checker saw ([`crate::evidence::describe`]).
    pub evidence: Option<String>,
    /// [`Nemesis::PauseWriter`]: the paused writer's stale write was refused by a
    /// fence only a later reader had raised (no later writer's read or write first).
    pub refused_by_reader_alone: bool,
}

struct Worker {
    child: Child,
    proxies: Vec<Arc<FaultProxy>>,
}

/// `url` with every `host:port` of its authority behind a new proxy.
async fn proxied(url: &str) -> std::io::Result<(String, Vec<Arc<FaultProxy>>)> {
    let Some(authority) = url_host_port(url) else {
        return Ok((url.to_owned(), Vec::new()));
    };
    if url.starts_with("sqlite") {
        return Ok((url.to_owned(), Vec::new()));
    }
    let mut hosts = Vec::new();
    let mut proxies = Vec::new();
    for h in authority.split(',') {
        let p = Arc::new(FaultProxy::start(h).await?);
        hosts.push(p.addr().to_string());
        proxies.push(p);
    }
    Ok((url.replacen(&authority, &hosts.join(","), 1), proxies))
}

impl Plan {
    /// How long a holder works under `nemesis`. A clock step must land mid-hold with
    /// time left for another worker to take over, so the step drills hold for 60 % of
    /// the TTL; under a clock rate, each holder works until its lease's deadline (as
    /// its own clock tells it; see the worker's `DLOCK_FAULTS_CLOCK_RATE`).
    #[must_use]
    pub fn hold_under(&self, nemesis: Nemesis) -> Duration {
        if nemesis.client_clock_step().is_some() || nemesis.server_clock_step().is_some() {
            self.hold.max(self.ttl * 6 / 10)
        } else {
            self.hold
        }
    }
}

async fn spawn_worker(
    plan: &Plan,
    backend: &Backend,
    (name, store, id): (&str, &str, u32),
    nemesis: Nemesis,
    clock: Option<&FakeClock>,
) -> std::io::Result<Worker> {
    let (url, proxies) = proxied(&backend.url_for(id)).await?;
    let mut cmd = Command::new(&plan.worker);
    if nemesis.client_clock_step().is_some() || nemesis.server_clock_step().is_some() {
        cmd.env("DLOCK_FAULTS_POLL_MS", "10");
    }
    if nemesis == Nemesis::PauseWriter {
        // one writer among readers: no other writer can raise the fence while it is
        // paused, so the fence that refuses its stale write is a reader's
        cmd.env("DLOCK_FAULTS_SOLE_WRITER", "0");
    }
    if let Some(clock) = clock.filter(|_| nemesis.server_clock_step().is_none()) {
        let rate = nemesis.client_clock_rate();
        cmd.envs(clock.env(rate.is_some()));
        if let Some(rate) = rate {
            cmd.env("DLOCK_FAULTS_CLOCK_RATE", rate.to_string());
        }
    }
    let child = cmd
        .args([
            url.as_str(),
            name,
            store,
            &id.to_string(),
            &plan.ttl.as_millis().to_string(),
            &plan.hold_under(nemesis).as_millis().to_string(),
            &worker_workload(plan),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(if std::env::var_os("DLOCK_FAULTS_VERBOSE").is_some() {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::null()
        })
        .kill_on_drop(true)
        .spawn()?;
    Ok(Worker { child, proxies })
}

/// The workload as the worker takes it: the workers on the backend's own store do
/// without the fence in the control runs (for the others the runner's store fences).
fn worker_workload(plan: &Plan) -> String {
    if matches!(plan.workload, Workload::OwnStore | Workload::Once) && !plan.fenced {
        format!("{}:unfenced", plan.workload.arg())
    } else {
        plan.workload.arg()
    }
}

fn signal(w: &Worker, sig: Signal) {
    if let Some(pid) = w.child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// Runs `nemesis` against `backend` once.
///
/// # Errors
/// When the store or a worker cannot be started.
pub async fn run(plan: &Plan, backend: &Backend, nemesis: Nemesis) -> std::io::Result<Outcome> {
    let store = FencedStore::start(plan.fenced, plan.workload).await?;
    let name = format!("faults/{}/{:016x}", backend.label, dlock_any::random_u64());
    let own = match plan.workload {
        Workload::OwnStore | Workload::Once => {
            let own = Box::pin(OwnStore::connect(&backend.url))
                .await
                .map(Box::new)
                .map_err(std::io::Error::other)?;
            match plan.workload {
                Workload::OwnStore => own.prepare_counter(&counter_key(&name)).await,
                _ => own.prepare_effects().await,
            }
            .map_err(std::io::Error::other)?;
            Some(own)
        }
        _ => None,
    };
    let clock = clock_for(plan, backend, nemesis).await?;
    let wall_clock = WallClockWatch::start();
    // whatever happens to the workers, servers on a faked clock go back to the true one
    let ran = run_workers(plan, backend, nemesis, &store, &name, clock.as_ref()).await;
    let wall_clock_moved = wall_clock.stop();
    if let Some(clock) = clock {
        restore_clock(plan, backend, nemesis, clock).await?;
    }
    // a promoted standby becomes a fresh copy of the primary again
    let rebuilt = match nemesis {
        Nemesis::StandbyPromoted => services(&plan.services, "rebuild", &["pg-standby"]).await,
        // the killed master comes back, as a replica of the new one
        Nemesis::SentinelFailover => crate::sentinel::restore(&plan.services, &backend.url).await,
        Nemesis::ClusterFailover => {
            crate::cluster::restore(&plan.services, &backend.url, &name).await
        }
        _ => true,
    };
    let (fault_at, victim, applied) = ran?;
    let applied = applied && rebuilt;
    let log = store.log();
    let recovery = if plan.workload == Workload::Once {
        takeover(&log, fault_at, victim)
    } else {
        log.iter()
            .find(|e| e.kind == Kind::Acquired && e.at > fault_at && Some(e.worker) != victim)
            .map(|e| e.at - fault_at)
    };
    let verdict = match (&own, plan.workload) {
        (Some(own), Workload::OwnStore) => {
            let mut verdict = check_as(&log, plan.workload);
            let counter = own
                .counter(&counter_key(&name))
                .await
                .map_err(std::io::Error::other)?;
            check_history(&mut verdict, &log, &counter);
            if (!verdict.safe() || verdict.lost_increments > 0)
                && std::env::var_os("DLOCK_FAULTS_DUMP").is_some()
            {
                eprintln!("{counter:?}\nfault at {fault_at:?} victim {victim:?}");
                for e in &log {
                    eprintln!("{e:?}");
                }
            }
            verdict
        }
        (Some(own), Workload::Once) => {
            let stored = own
                .effects_of_run(&name)
                .await
                .map_err(std::io::Error::other)?;
            check_once(&log, &stored)
        }
        _ => {
            let verdict = check_as(&log, plan.workload);
            if !verdict.safe() && std::env::var_os("DLOCK_FAULTS_DUMP").is_some() {
                eprintln!("fault at {fault_at:?} victim {victim:?}");
                for e in &log {
                    eprintln!("{e:?}");
                }
            }
            verdict
        }
    };
    let evidence = (!verdict.safe_if(backend.exclusion_expected(nemesis)))
        .then(|| describe(&log, plan.workload, fault_at, victim, wall_clock_moved));
    let refused_by_reader_alone = nemesis == Nemesis::PauseWriter
        && victim.is_some_and(|v| victims::refused_by_reader_alone(&log, fault_at, v));
    Ok(Outcome {
        verdict,
        recovery,
        applied,
        wall_clock_moved,
        evidence,
        refused_by_reader_alone,
    })
}

/// Starts the workers, applies the fault after the plan's warm-up, lets them run out
/// the plan's duration and stops them; returns when the fault struck, its victim, and whether it
/// could be applied.
async fn run_workers(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
    store: &FencedStore,
    name: &str,
    clock: Option<&FakeClock>,
) -> std::io::Result<(Duration, Option<u32>, bool)> {
    let started = store.now();
    let mut workers = Vec::new();
    for id in 0..plan.workers {
        let worker = spawn_worker(plan, backend, (name, store.addr(), id), nemesis, clock);
        workers.push(worker.await?);
    }
    sleep(plan.warmup).await;
    let (fault_at, victim, mut applied) = match clock {
        Some(clock) if nemesis != Nemesis::RedlockNodeForgets => {
            step_clock(nemesis, store, clock).await
        }
        _ => apply(plan, backend, (nemesis, clock), store, name, &mut workers).await,
    };
    if nemesis.server_clock_step().is_some() {
        // a preload that failed to load is only a warning from ld.so
        applied &= backend.clock_servers().iter().all(|s| preloaded(s, clock));
    }
    let rest = plan.duration.saturating_sub(store.now() - started);
    sleep(rest.max(Duration::from_secs(1))).await;
    for w in &mut workers {
        signal(w, Signal::SIGCONT);
        let _ = w.child.start_kill();
        let _ = w.child.wait().await;
    }
    Ok((fault_at, victim, applied))
}
