//! The metrics every backend gets through `connect`: exact counters for a
//! lock / contend / lose sequence, and samples in the histograms. One test in this
//! binary, because the recorder is global.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, Locker, metric_names as m};
use dlock_conformance::{required_env, take, unique_name};
use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// One snapshot (taking it resets the recorder's values).
type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

fn counter(s: &Snapshot, name: &str, backend: &str, outcome: Option<&str>) -> u64 {
    s.iter()
        .filter(|(k, ..)| {
            let key = k.key();
            let has = |l: &str, v: &str| key.labels().any(|x| x.key() == l && x.value() == v);
            key.name() == name
                && has("backend", backend)
                && outcome.is_none_or(|o| has("outcome", o))
        })
        .map(|(.., v)| match v {
            DebugValue::Counter(c) => *c,
            _ => 0,
        })
        .sum()
}

fn samples(s: &Snapshot, name: &str, backend: &str) -> usize {
    s.iter()
        .filter(|(k, ..)| {
            k.key().name() == name
                && k.key()
                    .labels()
                    .any(|l| l.key() == "backend" && l.value() == backend)
        })
        .map(|(.., v)| match v {
            DebugValue::Histogram(h) => h.len(),
            _ => 0,
        })
        .sum()
}

/// try (acquired), try (busy), acquire (timeout), release (released), release again
/// (not held), a guard that renews, is made to lose its lease, and is dropped (its
/// background release then finds the lock not held).
async fn sequence(lock: Arc<dyn DistributedLock>) {
    let name = unique_name("metrics");
    let a = take(&lock, &name, Duration::from_secs(30)).await;
    assert!(
        lock.try_acquire(&name, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        lock.acquire(&name, Duration::from_secs(30), Duration::from_millis(200))
            .await
            .is_err()
    );
    assert!(lock.release(&a).await.unwrap());
    assert!(!lock.release(&a).await.unwrap());
    let locker = Locker::new(Arc::clone(&lock)).with_ttl(Duration::from_millis(600));
    let guard = locker.lock(name.as_str()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // one renewal at ttl/3
    assert!(lock.release(&guard.lease()).await.unwrap()); // pulled from under the guard
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .unwrap();
    drop(guard);
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_histograms_on_memory_and_postgres() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    for (url, backend) in [
        ("memory://".to_owned(), "memory"),
        (required_env("DLOCK_TEST_POSTGRES_URL"), "postgres"),
    ] {
        sequence(dlock_any::connect(&url).await.unwrap()).await;
        let s = snapshotter.snapshot().into_vec();
        let expected = [
            (m::ACQUIRE_TOTAL, Some("acquired"), 2),
            (m::ACQUIRE_TOTAL, Some("busy"), 1),
            (m::ACQUIRE_TOTAL, Some("timeout"), 1),
            (m::RELEASE_TOTAL, Some("released"), 2),
            (m::RELEASE_TOTAL, Some("not_held"), 2),
            (m::RENEW_TOTAL, Some("ok"), 1),
            (m::RENEW_TOTAL, Some("lost"), 1),
            (m::LEASES_LOST, None, 1),
            (m::GUARDS_DROPPED, None, 1),
        ];
        for (name, outcome, count) in expected {
            assert_eq!(
                counter(&s, name, backend, outcome),
                count,
                "{backend} {name} {outcome:?}"
            );
        }
        assert_eq!(
            samples(&s, m::ACQUIRE_LATENCY, backend),
            2,
            "{backend}: one sample per try_acquire"
        );
        assert_eq!(
            samples(&s, m::ACQUIRE_WAIT, backend),
            2,
            "{backend}: one sample per acquire"
        );
        assert_eq!(
            samples(&s, m::HOLD, backend),
            1,
            "{backend}: the guard's hold time"
        );
    }
}
