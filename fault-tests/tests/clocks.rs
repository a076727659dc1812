//! The short clock drills, run in CI: every backend's workers have their wall clocks
//! stepped two hours ahead mid-hold (nothing may change, except on SQLite, whose
//! database clock is theirs); one server per family has its clock stepped ahead (Redis,
//! PostgreSQL, MariaDB: leases end early, and the fence must reject every stale write;
//! ZooKeeper: nothing may change); and Redis workers whose clocks run 20 % slow, beyond
//! the drift margin, must be caught by the fence — and, unfenced, must do harm.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use dlock_faults::backends::Backend;
use dlock_faults::report::{Row, clock_table};
use dlock_faults::run::{Plan, run};
use dlock_faults::{Nemesis, Workload};

/// One drill at a time: the server drills restart shared servers.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn plan(fenced: bool) -> Plan {
    Plan {
        worker: PathBuf::from(env!("CARGO_BIN_EXE_dlock-fault-worker")),
        services: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services")),
        workers: Workload::Mutex.workers(),
        ttl: Duration::from_secs(1),
        hold: Duration::from_millis(20),
        warmup: Duration::from_millis(1500),
        duration: Duration::from_secs(5),
        fenced,
        workload: Workload::Mutex,
    }
}

fn backend(label: &str, env_var: Option<&str>) -> Backend {
    dlock_faults::backends::for_test(label, env_var, "dlock-clocks-test")
}

/// Runs `nemeses` (fenced) on the backend: each applied, progress made, and safe as far
/// as the backend promises under it — never a stale write accepted or a token going
/// backwards.
async fn drills(label: &str, env_var: Option<&str>, nemeses: &[Nemesis]) {
    let _serial = SERIAL.lock().await;
    let b = backend(label, env_var);
    let mut rows = Vec::new();
    for &nemesis in nemeses {
        let o = run(&plan(true), &b, nemesis).await.unwrap();
        let v = &o.verdict;
        let promised = b.exclusion_expected(nemesis);
        rows.push((Row::of(label, nemesis.label(), &o), promised));
        let what = format!("{label} / {}", nemesis.label());
        assert!(o.applied, "{what}: could not be applied");
        assert!(v.safe_if(promised), "{what}: {v:?}");
        assert_eq!(v.lost_increments, 0, "{what}: {v:?}");
        assert!(
            v.ops > 0 || !promised,
            "{what}: no progress under a fault it promises to ride out: {v:?}"
        );
    }
    eprintln!("{}", clock_table(&rows));
}

/// One test per backend (its name, the suite's label, the variable naming its servers,
/// the clock faults it takes) that runs those drills there.
macro_rules! clock_drills {
    ($($test:ident: $label:literal, $env:expr, [$($nemesis:ident),*];)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                drills($label, $env, &[$(Nemesis::$nemesis),*]).await;
            }
        )*
    };
}

clock_drills! {
    sqlite: "sqlite", None, [ClientClockAhead];
    postgres: "postgres", Some("DLOCK_TEST_POSTGRES_URL"), [ClientClockAhead, ServerClockAhead];
    mariadb: "mariadb", Some("DLOCK_TEST_MYSQL_URL"), [ClientClockAhead, ServerClockAhead];
    redis: "redis", Some("DLOCK_TEST_REDIS_URL"),
        [ClientClockAhead, ServerClockAhead, ClientClockVerySlow];
    redlock: "redlock×5", Some("DLOCK_TEST_REDLOCK_URLS"), [ClientClockAhead];
    etcd: "etcd", Some("DLOCK_TEST_ETCD_ENDPOINTS"), [ClientClockAhead];
    etcd_cluster: "etcd×3", Some("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS"), [ClientClockAhead];
    zookeeper: "zookeeper", Some("DLOCK_TEST_ZK_ADDR"), [ClientClockAhead, ServerClockAhead];
    zookeeper_ensemble: "zookeeper×3", Some("DLOCK_TEST_ZK_CLUSTER_ADDR"), [ClientClockAhead];
}

/// Holders whose clocks run 20 % slow work past the server's expiry: without the fence
/// their late writes must land on a newer holder's (or this drill is not biting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_slow_clock_unfenced_does_harm() {
    let _serial = SERIAL.lock().await;
    let mut b = backend("redis", Some("DLOCK_TEST_REDIS_URL"));
    // In the default key layout waiters queue (FIFO), and the head sleeps until the
    // holder's expiry by its own clock — slowed like the holder's, so it takes over only
    // after the slow holder's overrun and this control saw no harm (4 ops, 0 overlaps).
    // Waiters that poll, as the plain layout's do, take over inside the overrun, where a
    // newer holder with a right clock would: the harm the fence must stop.
    let sep = if b.url.contains('?') { '&' } else { '?' };
    b.url = format!("{}{sep}layout=plain", b.url);
    let o = run(&plan(false), &b, Nemesis::ClientClockVerySlow)
        .await
        .unwrap();
    let v = &o.verdict;
    assert!(v.overlaps > 0, "no holder outlived its lease: {v:?}");
    assert!(
        v.stale_accepted + v.lost_increments > 0,
        "the unfenced slow clocks did no harm: {v:?}"
    );
}
