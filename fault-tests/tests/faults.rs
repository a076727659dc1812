//! The short fault suite, run in CI: every backend under every fault that applies, with
//! the fence (must be safe) and once without it (the pause must bite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use dlock_conformance::required_env;
use dlock_faults::backends::{Backend, from_env};
use dlock_faults::evidence::WALL_CLOCK_STEP;
use dlock_faults::report::{Row, idempotency_table, table};
use dlock_faults::run::{Outcome, Plan, run};
use dlock_faults::{Nemesis, Workload};

/// One scenario at a time: faults restart shared servers.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    if let Some(v) = env_var {
        let _ = required_env(v);
        let _ = required_env("DLOCK_SVC_DIR");
    }
    let dir = std::env::temp_dir().join(format!(
        "dlock-faults-test-{:016x}",
        dlock_any::random_u64()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    from_env(&dir.display().to_string())
        .into_iter()
        .find(|b| b.label == label)
        .unwrap()
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

async fn faults(label: &str, env_var: Option<&str>) {
    let _serial = SERIAL.lock().await;
    run_all(backend(label, env_var)).await;
}

async fn run_all(b: Backend) {
    let label = b.label;
    let mut rows = Vec::new();
    for nemesis in b.nemeses() {
        let o = judged(&plan(true), &b, nemesis).await;
        let v = &o.verdict;
        rows.push(Row {
            backend: label.into(),
            nemesis: nemesis.label().into(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        });
        assert!(
            o.applied,
            "{label}: {} could not be applied",
            nemesis.label()
        );
        assert!(
            v.safe_under(nemesis),
            "{label} / {}: {v:?}\n{}",
            nemesis.label(),
            o.evidence.as_deref().unwrap_or_default()
        );
        assert_eq!(v.lost_increments, 0, "{label} / {}: {v:?}", nemesis.label());
        assert!(v.ops > 0, "{label} / {}: no progress", nemesis.label());
        if nemesis == Nemesis::KillHolder {
            let r = o.recovery.expect("someone took over");
            assert!(
                r <= TTL + Duration::from_secs(1),
                "{label}: recovery after kill -9 took {r:?}"
            );
        }
    }
    // The semaphore (3 permits, 5 workers) and the read-write lock (4 workers, a writer
    // one time in four) under a crashed and a paused holder: no over-admission or
    // writer overlap inside validity windows, no stale operation accepted. (Redlock
    // offers neither; the conformance suite checks that it says so.)
    if !label.starts_with("redlock") {
        for workload in [Workload::Semaphore(3), Workload::ReadWrite] {
            let writer = (workload == Workload::ReadWrite).then_some(Nemesis::PauseWriter);
            for nemesis in [Nemesis::KillHolder, Nemesis::PauseHolder]
                .into_iter()
                .chain(writer)
            {
                let o = judged(&plan_for(true, workload), &b, nemesis).await;
                let v = &o.verdict;
                let what = format!("{}{}", nemesis.label(), workload.label());
                rows.push(Row {
                    backend: label.into(),
                    nemesis: what.clone(),
                    verdict: v.clone(),
                    recoveries: o.recovery.into_iter().collect(),
                    not_applied: u32::from(!o.applied),
                });
                assert!(o.applied, "{label}: {what} could not be applied");
                assert!(
                    v.safe_under(nemesis),
                    "{label} / {what}: {v:?}\n{}",
                    o.evidence.as_deref().unwrap_or_default()
                );
                assert!(v.ops > 0, "{label} / {what}: no progress");
                if workload == Workload::ReadWrite {
                    assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
                }
                if nemesis == Nemesis::PauseWriter {
                    // the writer woke after a later reader had read: its write came
                    // with its old token, and the fence the reader raised refused it
                    assert!(v.fence_rejections > 0, "{label} / {what}: {v:?}");
                }
            }
        }
    }
    // Leader election (3 candidates, each observing) under a crashed and a paused
    // leader: never two leaders inside validity windows, no deposed leader's write
    // accepted, no observer going back in epoch — on every backend, Redlock included.
    for nemesis in [Nemesis::KillHolder, Nemesis::PauseHolder] {
        let o = judged(&plan_for(true, Workload::Election), &b, nemesis).await;
        let v = &o.verdict;
        let what = format!("{}{}", nemesis.label(), Workload::Election.label());
        rows.push(Row {
            backend: label.into(),
            nemesis: what.clone(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        });
        assert!(o.applied, "{label}: {what} could not be applied");
        assert!(
            v.safe_under(nemesis),
            "{label} / {what}: {v:?}\n{}",
            o.evidence.as_deref().unwrap_or_default()
        );
        assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
        assert!(
            v.ops > 0 && v.observed > 0,
            "{label} / {what}: no progress: {v:?}"
        );
        if nemesis == Nemesis::KillHolder {
            let r = o.recovery.expect("a standby took over");
            assert!(
                r <= TTL + Duration::from_secs(1),
                "{label}: a standby led {r:?} after the leader's kill -9"
            );
        }
    }
    // The counter kept in the backend's own store and written through its fence helper
    // (SQL fenced transaction, Redis fenced script, etcd guarded transaction, ZooKeeper
    // guarded multi), and exactly-once effects behind `Idempotent` (SQL, Redis), under a
    // crashed and a paused holder: the store's own history rises strictly and keeps
    // every accepted write; no request's effect lands twice, all its callers agree.
    for workload in [Workload::OwnStore, Workload::Once] {
        if !b.runs(workload) || b.ensemble.is_some() {
            continue;
        }
        for nemesis in [Nemesis::KillHolder, Nemesis::PauseHolder] {
            let o = judged(&plan_for(true, workload), &b, nemesis).await;
            let v = &o.verdict;
            let what = format!("{}{}", nemesis.label(), workload.label());
            rows.push(Row {
                backend: label.into(),
                nemesis: what.clone(),
                verdict: v.clone(),
                recoveries: o.recovery.into_iter().collect(),
                not_applied: u32::from(!o.applied),
            });
            assert!(o.applied, "{label}: {what} could not be applied");
            assert!(
                v.safe_under(nemesis),
                "{label} / {what}: {v:?}\n{}",
                o.evidence.as_deref().unwrap_or_default()
            );
            assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
            assert!(v.ops > 0, "{label} / {what}: no progress: {v:?}");
        }
    }
    // Without the fence, a holder paused between its read and its write of the store's
    // own counter must overwrite a newer holder's write; a runner paused between its
    // look and its effect must apply the effect a second time after another took the
    // request over. A run can miss: the pause may land inside the holder's write (on
    // SQLite it then holds the database's write lock, and nobody moves), or a woken
    // ZooKeeper client may not know yet that its session is gone. So each control gets
    // three tries, and must bite in one.
    for workload in [Workload::OwnStore, Workload::Once] {
        if !b.runs(workload) || b.ensemble.is_some() {
            continue;
        }
        let what = format!(
            "{}{} (unfenced)",
            Nemesis::PauseHolder.label(),
            workload.label()
        );
        let mut bit = false;
        for _ in 0..3 {
            let o = run(&plan_for(false, workload), &b, Nemesis::PauseHolder)
                .await
                .unwrap();
            let v = &o.verdict;
            rows.push(Row {
                backend: label.into(),
                nemesis: what.clone(),
                verdict: v.clone(),
                recoveries: o.recovery.into_iter().collect(),
                not_applied: u32::from(!o.applied),
            });
            let harm =
                v.stale_accepted + v.lost_increments + v.duplicate_effects + v.results_disagreeing;
            if harm > 0 {
                bit = true;
                break;
            }
        }
        assert!(bit, "{label} / {what}: three unfenced pauses did no harm");
    }
    // Without the fence, a holder paused between its read and its write must corrupt
    // the counter: otherwise this nemesis is not biting.
    let o = run(&plan(false), &b, Nemesis::PauseHolder).await.unwrap();
    rows.push(Row {
        backend: label.into(),
        nemesis: "SIGSTOP holder > TTL (unfenced)".into(),
        verdict: o.verdict.clone(),
        recoveries: o.recovery.into_iter().collect(),
        not_applied: u32::from(!o.applied),
    });
    let (once, rows): (Vec<Row>, Vec<Row>) = rows
        .into_iter()
        .partition(|r| r.nemesis.contains(&Workload::Once.label()));
    eprintln!("{}\n{}", table(&rows), idempotency_table(&once));
    assert!(
        o.verdict.stale_accepted + o.verdict.lost_increments > 0,
        "{label}: the unfenced pause did no harm: {:?}",
        o.verdict
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    faults("sqlite", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    faults("postgres", Some("DLOCK_TEST_POSTGRES_URL")).await;
}

/// A failover to a standby that missed the last grants: overlaps are possible (the
/// standby forgot holders), but tokens never go back — a grant takes at least the
/// database clock in µs — so the fence accepts no stale write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_standby_promoted() {
    let _serial = SERIAL.lock().await;
    let _ = required_env("DLOCK_TEST_POSTGRES_STANDBY_URL");
    let b = backend(
        dlock_faults::backends::POSTGRES_PAIR,
        Some("DLOCK_TEST_POSTGRES_URL"),
    );
    let nemesis = Nemesis::StandbyPromoted;
    let o = judged(&plan(true), &b, nemesis).await;
    let v = &o.verdict;
    eprintln!(
        "{}",
        table(&[Row {
            backend: b.label.into(),
            nemesis: nemesis.label().into(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        }])
    );
    assert!(o.applied, "{}: the failover could not be staged", b.label);
    assert!(
        v.safe_under(nemesis),
        "{}: {v:?}\n{}",
        b.label,
        o.evidence.as_deref().unwrap_or_default()
    );
    assert!(v.ops > 0, "{}: no progress", b.label);
}

/// Redis Sentinel failing over to a replica that missed the last grants: overlaps are
/// possible (the replica forgot holders), but the hybrid token never goes back, so the
/// fence accepts no stale write; the workers, knowing only the sentinels, go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_sentinel_failover() {
    // the kill lands 2.5 s in (the warm-up, then 1.5 s with the replicas cut off) and
    // the sentinels take 1 s to call the master down and about 2 s more to promote:
    // room to see the workers carry on
    replica_failover(
        dlock_faults::backends::REDIS_SENTINEL,
        "DLOCK_TEST_REDIS_SENTINEL_URL",
        Nemesis::SentinelFailover,
        Duration::from_secs(12),
    )
    .await;
}

/// A Redis Cluster master failing over to a replica that missed the last grants: as
/// Sentinel's, overlaps are possible but the hybrid token never goes back, so the fence
/// accepts no stale write; the workers' cluster clients follow the new slot map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_failover() {
    // the kill lands 2.5 s in, and the cluster takes its node timeout (2 s) to call the
    // master failed and about a second more to promote
    replica_failover(
        dlock_faults::backends::REDIS_CLUSTER,
        "DLOCK_TEST_REDIS_CLUSTER_URL",
        Nemesis::ClusterFailover,
        Duration::from_secs(10),
    )
    .await;
}

/// A Redis failover `nemesis` on `label`, in a run of `duration`: staged as planned,
/// no stale write accepted, and a worker locking again afterwards.
async fn replica_failover(label: &str, env_var: &str, nemesis: Nemesis, duration: Duration) {
    let _serial = SERIAL.lock().await;
    let b = backend(label, Some(env_var));
    let plan = Plan {
        duration,
        ..plan(true)
    };
    let o = run(&plan, &b, nemesis).await.unwrap();
    let v = &o.verdict;
    eprintln!(
        "{}",
        table(&[Row {
            backend: b.label.into(),
            nemesis: nemesis.label().into(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        }])
    );
    assert!(o.applied, "{}: the failover could not be staged", b.label);
    assert!(
        v.safe_under(nemesis),
        "{}: {v:?}\n{}",
        b.label,
        o.evidence.as_deref().unwrap_or_default()
    );
    assert!(
        o.recovery.is_some(),
        "{}: no worker locked after the failover",
        b.label
    );
}

/// The holder faults (kill -9, SIGSTOP past the TTL) on the mutex, fenced: no overlap,
/// no stale write, no lost increment, and a crashed holder replaced within TTL + 1 s.
async fn holder_faults(label: &str, env_var: &str) {
    let _serial = SERIAL.lock().await;
    let b = backend(label, Some(env_var));
    let mut rows = Vec::new();
    // a cluster failover, which may break exclusion, has a test of its own
    for nemesis in b
        .nemeses()
        .into_iter()
        .filter(|n| *n != Nemesis::ClusterFailover)
    {
        let o = judged(&plan(true), &b, nemesis).await;
        let v = &o.verdict;
        rows.push(Row {
            backend: label.into(),
            nemesis: nemesis.label().into(),
            verdict: v.clone(),
            recoveries: o.recovery.into_iter().collect(),
            not_applied: u32::from(!o.applied),
        });
        assert!(
            o.applied,
            "{label}: {} could not be applied",
            nemesis.label()
        );
        assert!(
            v.safe_under(nemesis),
            "{label} / {}: {v:?}\n{}",
            nemesis.label(),
            o.evidence.as_deref().unwrap_or_default()
        );
        assert_eq!(v.lost_increments, 0, "{label} / {}: {v:?}", nemesis.label());
        assert!(v.ops > 0, "{label} / {}: no progress", nemesis.label());
        if nemesis == Nemesis::KillHolder {
            let r = o.recovery.expect("someone took over");
            assert!(r <= TTL + Duration::from_secs(1), "{label}: recovery {r:?}");
        }
    }
    eprintln!("{}", table(&rows));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster() {
    holder_faults(
        dlock_faults::backends::REDIS_CLUSTER,
        "DLOCK_TEST_REDIS_CLUSTER_URL",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer() {
    holder_faults(
        dlock_faults::backends::PGBOUNCER,
        "DLOCK_TEST_PGBOUNCER_URL",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    faults("mariadb", Some("DLOCK_TEST_MYSQL_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    faults("redis", Some("DLOCK_TEST_REDIS_URL")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock() {
    faults("redlock×5", Some("DLOCK_TEST_REDLOCK_URLS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd() {
    faults("etcd", Some("DLOCK_TEST_ETCD_ENDPOINTS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster() {
    faults("etcd×3", Some("DLOCK_TEST_ETCD_CLUSTER_ENDPOINTS")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper() {
    faults("zookeeper", Some("DLOCK_TEST_ZK_ADDR")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_ensemble() {
    faults("zookeeper×3", Some("DLOCK_TEST_ZK_CLUSTER_ADDR")).await;
}

/// A private ensemble: a server cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_server_partition() {
    let _serial = SERIAL.lock().await;
    let dir = std::env::temp_dir().join(format!(
        "dlock-faults-ensemble-{:016x}",
        dlock_any::random_u64()
    ));
    run_all(Backend::partitionable_zookeeper(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private etcd cluster: a member cut off from its peers while its clients reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_server_partition() {
    let _serial = SERIAL.lock().await;
    let dir = std::env::temp_dir().join(format!(
        "dlock-faults-etcd-{:016x}",
        dlock_any::random_u64()
    ));
    run_all(Backend::partitionable_etcd(&dir).await).await;
    let _ = std::fs::remove_dir_all(&dir);
}
