//! Guards renew from one timetable per runtime: a held lock is an entry in it, not a
//! task of its own, and a runtime started after another one shut down renews its own
//! guards.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, LockName, Locker, MemoryLock};
use tokio::runtime::{Builder, Handle};
use tokio::time::sleep;

const TTL: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_guards_are_not_a_task_each() {
    let table = MemoryLock::new();
    let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
    // the first guard starts the runtime's renewal task
    let first = locker.lock("timetable/first").await.unwrap();
    let tasks_before = Handle::current().metrics().num_alive_tasks();
    let mut guards = Vec::new();
    for i in 0..2_000 {
        guards.push(locker.lock(format!("timetable/{i}")).await.unwrap());
    }
    let tasks_held = Handle::current().metrics().num_alive_tasks();
    assert!(
        tasks_held < tasks_before + 10,
        "2 000 held guards took {} tasks",
        tasks_held - tasks_before
    );
    // and they are renewed: held past three TTLs, the names still taken
    sleep(TTL * 3).await;
    assert!(guards.iter().all(|g| g.is_held()), "every guard renewed");
    let name = LockName::new("timetable/1999").unwrap();
    assert!(table.try_acquire(&name, TTL).await.unwrap().is_none());
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    assert!(first.release().await.unwrap());
}

/// Holds one guard for three TTLs on a fresh current-thread runtime, and says whether
/// it stayed held.
fn hold_on_a_new_runtime(table: &MemoryLock, name: &str) -> bool {
    let runtime = Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let locker = Locker::new(Arc::new(table.clone())).with_ttl(TTL);
        let guard = locker.lock(name).await.unwrap();
        sleep(TTL * 3).await;
        let held = guard.is_held();
        assert!(guard.release().await.unwrap());
        held
    })
}

#[test]
fn each_runtime_renews_its_own_guards_after_another_shut_down() {
    let table = MemoryLock::new();
    // runtime ids may be reused once a runtime is gone: the second must not find the
    // first one's timetable, whose task went with it
    for round in 0..3 {
        assert!(
            hold_on_a_new_runtime(&table, &format!("timetable/runtime-{round}")),
            "round {round}: the guard was not renewed"
        );
    }
}

#[test]
fn two_runtimes_at_once_each_renew_their_guards() {
    let table = MemoryLock::new();
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let table = table.clone();
            std::thread::spawn(move || {
                hold_on_a_new_runtime(&table, &format!("timetable/both-{i}"))
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap(), "a guard was not renewed");
    }
}
