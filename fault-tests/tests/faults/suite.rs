//! The whole suite on one backend: every fault that applies on the mutex, the semaphore
//! and read-write lock, leader election and the backend's own store, fenced, then the
//! unfenced controls that must bite.

use std::time::Duration;

use dlock_faults::backends::Backend;
use dlock_faults::report::{Row, idempotency_table, table};
use dlock_faults::run::run;
use dlock_faults::{Nemesis, Workload};

use crate::{TTL, assert_safe, backend, judged, plan, plan_for, take_servers};

pub(crate) async fn faults(label: &str, env_var: Option<&str>) {
    let b = backend(label, env_var);
    let _taken = take_servers(&b).await;
    run_all(b).await;
}

/// One nemesis on the mutex, fenced, judged — no overlap, no stale write, no lost
/// increment, progress, and a killed holder (or a killed waiter the lock was granted
/// to) replaced within TTL + 1 s — and its report row.
pub(crate) async fn mutex_under(b: &Backend, nemesis: Nemesis) -> Row {
    let label = b.label;
    let o = judged(&plan(true), b, nemesis).await;
    let v = &o.verdict;
    assert_safe(label, nemesis.label(), nemesis, &o);
    assert_eq!(v.lost_increments, 0, "{label} / {}: {v:?}", nemesis.label());
    // a dead holder, or a dead waiter granted the lock, holds it one TTL at most
    if matches!(nemesis, Nemesis::KillHolder | Nemesis::KillWaiter) {
        let r = o.recovery.expect("someone took over");
        assert!(
            r <= TTL + Duration::from_secs(1),
            "{label}: recovery after kill -9 took {r:?}"
        );
    }
    // a revoked holder keeps the lock until it lets go or its lease runs out (on etcd
    // the lease its key was moved onto runs longer: its release is what frees it)
    if nemesis == Nemesis::RevokeHolder {
        let r = o.recovery.expect("someone took over");
        assert!(
            r <= TTL * 2 + Duration::from_secs(2),
            "{label}: recovery after a revoke took {r:?}"
        );
    }
    Row::of(label, nemesis.label(), &o)
}

pub(crate) async fn run_all(b: Backend) {
    let label = b.label;
    let mut rows = Vec::new();
    for nemesis in b.nemeses() {
        rows.push(mutex_under(&b, nemesis).await);
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
                rows.push(Row::of(label, what.clone(), &o));
                assert_safe(label, &what, nemesis, &o);
                if workload == Workload::ReadWrite {
                    assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
                }
                if nemesis == Nemesis::PauseWriter {
                    // the writer woke after a later reader had read: its write came
                    // with its old token, and the fence the reader raised refused it
                    assert!(v.fence_rejections > 0, "{label} / {what}: {v:?}");
                    // and no later writer had raised the fence before it did
                    assert!(
                        o.refused_by_reader_alone,
                        "{label} / {what}: the stale write was not refused by the reader's fence alone: {v:?}"
                    );
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
        rows.push(Row::of(label, what.clone(), &o));
        assert_safe(label, &what, nemesis, &o);
        assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
        assert!(v.observed > 0, "{label} / {what}: no progress: {v:?}");
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
            rows.push(Row::of(label, what.clone(), &o));
            assert_safe(label, &what, nemesis, &o);
            assert_eq!(v.lost_increments, 0, "{label} / {what}: {v:?}");
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
            rows.push(Row::of(label, what.clone(), &o));
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
    rows.push(Row::of(label, "SIGSTOP holder > TTL (unfenced)", &o));
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
