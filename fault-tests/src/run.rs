//! One run: workers, a fenced store, one fault, a verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::{FaultMode, FaultProxy, url_host_port};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::sleep;

use crate::backends::Backend;
use crate::checker::{Verdict, check_as, check_history, check_once};
use crate::clock::FakeClock;
use crate::evidence::{WallClockWatch, describe};
use crate::nemesis::{Nemesis, leader, redis_command, services, services_with};
use crate::own_store::OwnStore;
use crate::own_store::counter::counter_key;
use crate::replica::LaggingReplica;
use crate::standby::Standby;
use crate::store::{FencedStore, Kind};
use crate::workload::Workload;

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

/// Each worker's latest step in the store's log.
fn last_steps(store: &FencedStore) -> std::collections::BTreeMap<u32, (Kind, bool)> {
    let mut last = std::collections::BTreeMap::new();
    // an observer's report, or a caller's result, says nothing about its worker's hold
    for e in store
        .log()
        .into_iter()
        .filter(|e| !matches!(e.kind, Kind::Observed | Kind::Result))
    {
        last.insert(e.worker, (e.kind, e.accepted));
    }
    last
}

/// A worker that holds the lock now (acquired or working under it, not released), per
/// the store's log; with several holders (a semaphore, readers), the first.
fn holder(store: &FencedStore) -> Option<u32> {
    last_steps(store)
        .into_iter()
        .find(|(_, (k, _))| *k != Kind::Released)
        .map(|(w, _)| w)
}

/// Whether worker `w` has read the counter and not yet written or released.
fn reading(store: &FencedStore, w: u32) -> bool {
    last_steps(store)
        .get(&w)
        .is_some_and(|(k, accepted)| *k == Kind::Read && *accepted)
}

/// A worker that has read the counter and not yet written: the moment to pause it.
fn mid_update(store: &FencedStore) -> Option<u32> {
    last_steps(store)
        .into_iter()
        .find(|(_, (k, accepted))| *k == Kind::Read && *accepted)
        .map(|(w, _)| w)
}

/// The worker a holder fault strikes: a holder — for idempotency, a runner mid-work
/// (between its look and its effect), where a fault matters to exactly-once.
fn victim(plan: &Plan, store: &FencedStore) -> Option<u32> {
    match plan.workload {
        Workload::Once => mid_update(store),
        _ => holder(store),
    }
}

async fn wait_for(mut probe: impl FnMut() -> Option<u32>, within: Duration) -> Option<u32> {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if let Some(w) = probe() {
            return Some(w);
        }
        sleep(Duration::from_millis(1)).await;
    }
    None
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
    Ok(Outcome {
        verdict,
        recovery,
        applied,
        wall_clock_moved,
        evidence,
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
        Some(clock) => step_clock(nemesis, store, clock).await,
        None => apply(plan, backend, nemesis, store, name, &mut workers).await,
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

/// Whether the `scripts/services` server `name` runs with `clock`'s library loaded.
fn preloaded(name: &str, clock: Option<&FakeClock>) -> bool {
    let (Some(clock), Ok(dir)) = (clock, std::env::var("DLOCK_SVC_DIR")) else {
        return false;
    };
    let pid = std::fs::read_to_string(format!("{dir}/pids/{name}.pid")).unwrap_or_default();
    let pid = pid.split_whitespace().next().unwrap_or_default();
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains(&clock.library().display().to_string()))
}

/// The faked clock a clock fault runs on, set up: the workers' (started on it by
/// [`spawn_worker`]), or the servers' (restarted on it here, before the workers come).
async fn clock_for(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
) -> std::io::Result<Option<FakeClock>> {
    let dir = std::env::temp_dir().join("dlock-faults-clocks");
    if let Some(rate) = nemesis.client_clock_rate() {
        let clock = FakeClock::new(&dir)?;
        clock.set(&format!("+0 x{rate}"))?;
        return Ok(Some(clock));
    }
    if nemesis.client_clock_step().is_some() {
        return FakeClock::new(&dir).map(Some);
    }
    if nemesis.server_clock_step().is_none() {
        return Ok(None);
    }
    // libfaketime cannot load into jemalloc-linked Redis, and slows the JVM to a crawl
    let servers = backend.clock_servers();
    if servers.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: no server whose clock can be stepped",
            backend.label
        )));
    }
    let clock = if backend.redis || backend.label.starts_with("zookeeper") {
        FakeClock::stepping(&dir)?
    } else {
        FakeClock::new(&dir)?
    };
    if !services_with(&plan.services, "restart", &servers, &clock.env(false)).await {
        let _ = services(&plan.services, "restart", &servers).await;
        return Err(std::io::Error::other(format!(
            "could not restart {servers:?} on a faked clock"
        )));
    }
    Ok(Some(clock))
}

/// Steps `clock` while a holder is mid-update (a rate fault runs from the start).
async fn step_clock(
    nemesis: Nemesis,
    store: &FencedStore,
    clock: &FakeClock,
) -> (Duration, Option<u32>, bool) {
    let Some(step) = nemesis
        .client_clock_step()
        .or_else(|| nemesis.server_clock_step())
    else {
        return (store.now(), None, true);
    };
    let Some(v) = wait_for(|| mid_update(store), Duration::from_secs(5)).await else {
        return (store.now(), None, false);
    };
    let at = store.now();
    (at, Some(v), clock.set(&format!("{step:+}")).is_ok())
}

/// Puts a server clock fault's servers back on the true clock.
async fn restore_clock(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
    clock: FakeClock,
) -> std::io::Result<()> {
    if nemesis.server_clock_step().is_none() {
        return Ok(());
    }
    let servers = backend.clock_servers();
    let restored = services(&plan.services, "restart", &servers).await;
    drop(clock);
    if restored {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "could not restart {servers:?} on the true clock"
        )))
    }
}

/// Idempotency: from the fault to the first result of the request its victim was
/// working on (another runner finished it, or found it finished); none when the victim
/// had not reached its work's hold (its request is not in the log yet).
fn takeover(
    log: &[crate::store::Event],
    fault_at: Duration,
    victim: Option<u32>,
) -> Option<Duration> {
    let last = log.iter().rev().find(|e| {
        matches!(e.kind, Kind::Read | Kind::Acquired)
            && Some(e.worker) == victim
            && e.at <= fault_at
    })?;
    let k = (last.kind == Kind::Read).then_some(last.n)?;
    log.iter()
        .find(|e| e.kind == Kind::Result && e.accepted && e.n == k && e.at > fault_at)
        .map(|e| e.at - fault_at)
}

/// Applies the fault; returns when it was applied, its victim, and whether it was.
async fn apply(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
    store: &FencedStore,
    name: &str,
    workers: &mut [Worker],
) -> (Duration, Option<u32>, bool) {
    let past_ttl = plan.ttl + Duration::from_millis(1500);
    let script: &Path = &plan.services;
    match nemesis {
        Nemesis::KillHolder => {
            let Some(v) = wait_for(|| victim(plan, store), Duration::from_secs(5)).await else {
                return (store.now(), None, false);
            };
            let at = store.now();
            signal(&workers[v as usize], Signal::SIGKILL);
            (at, Some(v), true)
        }
        Nemesis::PauseHolder => {
            // Stop a holder between its read and its write. On a busy machine the signal
            // can land after the write; then let it go and catch another one.
            for _ in 0..20 {
                let Some(v) = wait_for(|| mid_update(store), Duration::from_secs(5)).await else {
                    break;
                };
                let at = store.now();
                signal(&workers[v as usize], Signal::SIGSTOP);
                sleep(Duration::from_millis(50)).await;
                if !reading(store, v) {
                    signal(&workers[v as usize], Signal::SIGCONT);
                    continue;
                }
                sleep(past_ttl).await;
                signal(&workers[v as usize], Signal::SIGCONT);
                return (at, Some(v), true);
            }
            (store.now(), None, false)
        }
        Nemesis::Partition => {
            let Some(v) = wait_for(|| victim(plan, store), Duration::from_secs(5)).await else {
                return (store.now(), None, false);
            };
            let at = store.now();
            for p in &workers[v as usize].proxies {
                p.set_mode(FaultMode::Blackhole);
            }
            sleep(past_ttl).await;
            for p in &workers[v as usize].proxies {
                p.set_mode(FaultMode::Pass);
            }
            (at, Some(v), true)
        }
        Nemesis::Latency => {
            let at = store.now();
            for w in workers.iter() {
                for p in &w.proxies {
                    p.set_mode(FaultMode::Delay(Duration::from_millis(100)));
                }
            }
            sleep(Duration::from_secs(2)).await;
            for w in workers.iter() {
                for p in &w.proxies {
                    p.set_mode(FaultMode::Pass);
                }
            }
            (at, None, true)
        }
        Nemesis::RestartServer => {
            let at = store.now();
            let ok = services(script, "restart", &backend.servers).await;
            (at, None, ok)
        }
        Nemesis::DataLoss => {
            let hosts: Vec<String> = url_host_port(&backend.url)
                .map(|a| a.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            let mut ok = !hosts.is_empty();
            for h in &hosts {
                ok &= redis_command(h, &["SAVE"]).await;
            }
            // the workload moves on: holders change, counters grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            for h in &hosts {
                ok &= redis_command(h, &["DEBUG", "RELOAD", "NOSAVE"]).await;
            }
            (at, None, ok)
        }
        Nemesis::LaggingReplica => {
            let Some(primary) = url_host_port(&backend.url) else {
                return (store.now(), None, false);
            };
            let Some(replica) = LaggingReplica::start(&primary).await else {
                return (store.now(), None, false);
            };
            let cut = replica.cut().await;
            // the workload moves on without the replica: holders change, counters grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            let ok = replica.promote().await;
            (at, None, cut && ok)
        }
        Nemesis::SentinelFailover => {
            let ok = crate::sentinel::fail_over_to_a_lagging_replica(script, &backend.url).await;
            (store.now(), None, ok)
        }
        Nemesis::ClusterFailover => {
            let ok =
                crate::cluster::fail_over_to_a_lagging_replica(script, &backend.url, name).await;
            (store.now(), None, ok)
        }
        Nemesis::StandbyPromoted => {
            let (Some(primary), Ok(standby_url)) = (
                url_host_port(&backend.url),
                std::env::var("DLOCK_TEST_POSTGRES_STANDBY_URL"),
            ) else {
                return (store.now(), None, false);
            };
            let Some(standby) = Standby::attach(&primary, &standby_url).await else {
                return (store.now(), None, false);
            };
            standby.cut();
            // the workload moves on without the standby: holders change, tokens grow
            sleep(Duration::from_millis(1500)).await;
            let at = store.now();
            let Some(new_primary) = standby.promote().await else {
                return (at, None, false);
            };
            for w in workers.iter() {
                for p in &w.proxies {
                    p.retarget(new_primary);
                }
            }
            (at, None, true)
        }
        Nemesis::ServerPartition => {
            let Some(ensemble) = &backend.ensemble else {
                return (store.now(), None, false);
            };
            let e = ensemble;
            // a holder connected to a follower (worker i talks to server i % 3)
            for _ in 0..20 {
                let Some(leader) = e.leader().await else {
                    sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let Some(v) = wait_for(|| holder(store), Duration::from_secs(5)).await else {
                    break;
                };
                let server = usize::try_from(v).unwrap_or(0) % e.client_addrs().len();
                if server == leader {
                    sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let at = store.now();
                e.partition(server);
                // past the TTL and past the follower's own give-up (syncLimit, 3 s)
                sleep(past_ttl + Duration::from_secs(2)).await;
                e.heal(server);
                return (at, Some(v), true);
            }
            (store.now(), None, false)
        }
        Nemesis::ClientClockAhead
        | Nemesis::ClientClockBehind
        | Nemesis::ClientClockSlow
        | Nemesis::ClientClockVerySlow
        | Nemesis::ClientClockFast
        | Nemesis::ServerClockAhead
        | Nemesis::ServerClockBehind => (store.now(), None, false), // see `step_clock`
        Nemesis::KillMember | Nemesis::KillLeader => {
            let victims: Vec<&str> = if backend.has_leader {
                let hosts: Vec<String> = url_host_port(&backend.url)
                    .map(|a| a.split(',').map(str::to_owned).collect())
                    .unwrap_or_default();
                let Some(l) = leader(&hosts, backend.label.starts_with("etcd")).await else {
                    return (store.now(), None, false);
                };
                let i = if nemesis == Nemesis::KillLeader {
                    l
                } else {
                    (l + 1) % hosts.len()
                };
                vec![backend.servers[i]]
            } else {
                // Redlock: two of five masters
                backend.servers[..2].to_vec()
            };
            let at = store.now();
            let killed = services(script, "kill", &victims).await;
            sleep(Duration::from_secs(2)).await;
            let started = services(script, "start", &victims).await;
            (at, None, killed && started)
        }
    }
}
