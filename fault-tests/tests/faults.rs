//! The short fault suite, run in CI: every backend under every fault that applies, with
//! the fence (must be safe) and once without it (the pause must bite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The parts of this one test binary live in tests/faults/ (a crate root looks for
// `mod x;` beside itself, hence the `#[path]`s).
//
/// One test per backend (its name, the suite's label, the variable naming its servers)
/// that runs `$run` there.
macro_rules! faults_on {
    ($run:ident => $($test:ident: $label:expr, $env:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                $run($label, $env).await;
            }
        )*
    };
}

// The whole suite on one backend, and the tests that run it.
#[path = "faults/every_fault.rs"]
mod every_fault;
#[path = "faults/suite.rs"]
mod suite;
// The drills of their own.
#[path = "faults/holder_only.rs"]
mod holder_only;
#[path = "faults/promotions.rs"]
mod promotions;

use std::path::PathBuf;
use std::time::Duration;

use dlock_faults::backends::Backend;
use dlock_faults::evidence::WALL_CLOCK_STEP;
use dlock_faults::run::{Outcome, Plan, run};
use dlock_faults::{Nemesis, Workload};

/// The shared servers the running tests stop and restart.
static BUSY: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
/// Woken when a test gives its servers back.
static FREED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// The servers a test took: no other test runs a fault on them (or on what they serve)
/// until it is dropped. Tests on other servers run beside it, on the test harness's
/// threads — a fault run mostly waits (a suite uses about a quarter of one core), so
/// two side by side halve this binary's time without crowding the machine.
struct Taken(Vec<&'static str>);

impl Drop for Taken {
    fn drop(&mut self) {
        busy().retain(|s| !self.0.contains(s));
        FREED.notify_waiters();
    }
}

fn busy() -> std::sync::MutexGuard<'static, Vec<&'static str>> {
    BUSY.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until none of `b`'s servers is taken, and takes them all at once. PgBouncer's
/// runs need PostgreSQL's server too, which the PostgreSQL runs restart.
async fn take_servers(b: &Backend) -> Taken {
    let mut servers = b.servers.clone();
    if b.label == dlock_faults::backends::PGBOUNCER {
        servers.push("pg");
    }
    loop {
        // registered before the look, so a release in between is not missed
        let freed = FREED.notified();
        {
            let mut busy = busy();
            if servers.iter().all(|s| !busy.contains(s)) {
                busy.extend(&servers);
                return Taken(servers);
            }
        }
        freed.await;
    }
}

const TTL: Duration = Duration::from_secs(1);

fn plan(fenced: bool) -> Plan {
    plan_for(fenced, Workload::Mutex)
}

fn plan_for(fenced: bool, workload: Workload) -> Plan {
    Plan {
        worker: PathBuf::from(env!("CARGO_BIN_EXE_dlock-fault-worker")),
        services: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services")),
        workers: workload.workers(),
        ttl: TTL,
        hold: Duration::from_millis(20),
        // short runs, as CI needs them (the long runs behind FAULTS.md settle for
        // 1.5 s and run 8 s): a second to settle, the fault, and at least a second
        // after it (a pause runs 1 + 2.5 + 1 s)
        warmup: Duration::from_secs(1),
        duration: Duration::from_secs(4),
        fenced,
        workload,
    }
}

fn backend(label: &str, env_var: Option<&str>) -> Backend {
    dlock_faults::backends::for_test(label, env_var, "dlock-faults-test")
}

/// What every fenced run must show: the fault applied, nothing unsafe under it, and
/// progress.
pub(crate) fn assert_safe(label: &str, what: &str, nemesis: Nemesis, o: &Outcome) {
    let v = &o.verdict;
    assert!(o.applied, "{label}: {what} could not be applied");
    assert!(
        v.safe_under(nemesis),
        "{label} / {what}: {v:?}\n{}",
        o.evidence.as_deref().unwrap_or_default()
    );
    assert!(v.ops > 0, "{label} / {what}: no progress: {v:?}");
}

/// One run of `nemesis`. A run during which something outside the test stepped this
/// machine's time of day (by more than [`WALL_CLOCK_STEP`]) and that broke exclusion on
/// a backend whose expiry follows that clock is reported and made again, up to twice:
/// a stepped clock is the clock drills' fault (`tests/clocks.rs`), where such a
/// backend is known to lose exclusion, not the fault this run injects. Every other
/// run is judged as it came out.
async fn judged(plan: &Plan, b: &Backend, nemesis: Nemesis) -> Outcome {
    let follows_wall_clock = !b.exclusion_expected(Nemesis::ServerClockAhead);
    for _ in 0..2 {
        let o = run(plan, b, nemesis).await.unwrap();
        let void =
            follows_wall_clock && o.wall_clock_moved > WALL_CLOCK_STEP && o.evidence.is_some();
        if !void {
            return o;
        }
        eprintln!(
            "{} / {}: the machine's time of day was stepped during the run; the run is void and made again:\n{}",
            b.label,
            nemesis.label(),
            o.evidence.as_deref().unwrap_or_default()
        );
    }
    run(plan, b, nemesis).await.unwrap()
}
