//! The idempotency helper on a store's [`ResultStore`]: every case as one `pub async fn`
//! that a store's tests call with two clients (each a lock and the store's records, as
//! two processes would have them).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{
    DistributedLock, Idempotent, LockError, LockName, Outcome, ResultStore, random_u64,
};

/// One process's view: a lock client and the same store's records.
pub type Side = (Arc<dyn DistributedLock>, Arc<dyn ResultStore>);

/// Runs every case; `short_ttl` is a lease the backend expires promptly.
pub async fn idempotency_suite(a: Side, b: Side, short_ttl: Duration) {
    once_then_done(&a).await;
    concurrent_callers_run_once(&a, &b).await;
    failures_are_not_recorded(&a).await;
    late_runner_is_fenced_off(&a, &b, short_ttl).await;
    results_expire_after_retention(&a).await;
}

fn request(case: &str) -> String {
    format!("{case}/{:016x}", random_u64())
}

/// A first call runs the work and records its result; a second gets the result
/// without running it.
async fn once_then_done((lock, results): &Side) {
    let once = Idempotent::new(Arc::clone(lock), Arc::clone(results));
    let id = request("once");
    let runs = AtomicUsize::new(0);
    let work = |_| async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(b"result-1".to_vec())
    };
    assert_eq!(
        once.run_once(&id, work).await.expect("run"),
        Outcome::Ran(b"result-1".to_vec())
    );
    assert_eq!(
        once.run_once(&id, work).await.expect("run"),
        Outcome::Done(b"result-1".to_vec())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Callers on two clients at once, each waiting: the work runs exactly once, everyone
/// gets its result.
async fn concurrent_callers_run_once(a: &Side, b: &Side) {
    let id = request("concurrent");
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (lock, results) = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (id, runs) = (id.clone(), Arc::clone(&runs));
        tasks.push(tokio::spawn(async move {
            let once = Idempotent::new(lock, results).with_wait(Duration::from_secs(20));
            once.run_once(&id, |_| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, String>(b"paid".to_vec())
            })
            .await
            .expect("run_once")
        }));
    }
    let mut ran = 0;
    for t in tasks {
        match t.await.expect("task") {
            Outcome::Ran(r) => {
                ran += 1;
                assert_eq!(r, b"paid");
            }
            Outcome::Done(r) => assert_eq!(r, b"paid"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((ran, runs.load(Ordering::SeqCst)), (1, 1), "exactly once");
}

/// A failed run records nothing: the next call runs the work again.
async fn failures_are_not_recorded((lock, results): &Side) {
    let once = Idempotent::new(Arc::clone(lock), Arc::clone(results));
    let id = request("failure");
    let failed = once
        .run_once(&id, |_| async { Err::<Vec<u8>, _>("card declined") })
        .await
        .expect("run");
    assert_eq!(failed, Outcome::Failed("card declined"));
    let ok = once
        .run_once(&id, |_| async { Ok::<_, &str>(b"ok".to_vec()) })
        .await
        .expect("run");
    assert_eq!(ok, Outcome::Ran(b"ok".to_vec()));
}

/// A runner whose lease ran out mid-work (a pause) is taken over by another with a
/// higher token; its late result is refused and the new runner's result stands.
async fn late_runner_is_fenced_off((lock_a, results_a): &Side, b: &Side, short_ttl: Duration) {
    let id = request("takeover");
    let name = LockName::new(&format!("idempotent/{id}")).expect("name");
    let retain = Duration::from_secs(60);
    let paused = lock_a
        .try_acquire(&name, short_ttl)
        .await
        .expect("acquire")
        .expect("free");
    results_a
        .begin(&id, paused.token(), retain)
        .await
        .expect("begin");
    // the runner stalls past its lease; another caller takes the request over
    let once = Idempotent::new(Arc::clone(&b.0), Arc::clone(&b.1))
        .with_retention(retain)
        .with_wait(short_ttl * 4 + Duration::from_secs(10));
    let stalled = paused.token();
    let out = once
        .run_once(&id, |token| async move {
            assert!(token > stalled);
            Ok::<_, String>(b"second".to_vec())
        })
        .await
        .expect("takeover");
    assert_eq!(out, Outcome::Ran(b"second".to_vec()));
    let late = results_a
        .record(&id, paused.token(), b"first, late", retain)
        .await;
    assert!(
        matches!(late, Err(LockError::StaleToken { .. })),
        "{late:?}"
    );
    assert_eq!(
        results_a.result(&id).await.expect("result"),
        Some(b"second".to_vec())
    );
}

/// After its retention a result is forgotten and the request runs again.
async fn results_expire_after_retention((lock, results): &Side) {
    let once = Idempotent::new(Arc::clone(lock), Arc::clone(results))
        .with_retention(Duration::from_millis(1500));
    let id = request("retention");
    let work = |_| async { Ok::<_, String>(b"r".to_vec()) };
    assert!(matches!(
        once.run_once(&id, work).await.expect("run"),
        Outcome::Ran(_)
    ));
    assert!(matches!(
        once.run_once(&id, work).await.expect("run"),
        Outcome::Done(_)
    ));
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(matches!(
        once.run_once(&id, work).await.expect("run"),
        Outcome::Ran(_)
    ));
}
