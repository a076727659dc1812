//! `fallback=` on every scheme: an unreachable lock service is served by the fallback,
//! loudly marked on each lease; a bad value is a configuration error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_any::{Fallback, LockError, LockName, connect};
use dlock_conformance::{take, unique_name};

/// One URL per scheme, each pointing at a port nothing listens on.
/// (Those of the backends this build has: etcd needs `protoc` to build.)
const UNREACHABLE: &[&str] = &[
    "redis://127.0.0.1:9/?timeout=300ms",
    "redlock://127.0.0.1:9,127.0.0.1:10,127.0.0.1:11/?timeout=300ms",
    #[cfg(feature = "etcd")]
    "etcd://127.0.0.1:9?timeout=500ms",
    "zk://127.0.0.1:9?timeout=500ms",
    "postgres://dlock:dlock@127.0.0.1:9/dlock?op_timeout=500ms",
    "mysql://dlock:dlock@127.0.0.1:9/dlock?op_timeout=500ms",
];

/// Whether `lock` grants a try for `n` (the lease is left to run out).
async fn takes(lock: &dyn dlock_any::DistributedLock, n: &LockName) -> bool {
    let lease = lock.try_acquire(n, Duration::from_secs(5)).await;
    lease.unwrap().is_some()
}

fn name() -> LockName {
    unique_name("fallback")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_fallback_serves_an_unreachable_service_on_every_scheme() {
    for url in UNREACHABLE {
        let url = format!("{url}&fallback=local");
        let lock = tokio::time::timeout(Duration::from_secs(20), connect(&url))
            .await
            .unwrap_or_else(|_| panic!("{url}: connect hung"))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let n = name();
        let lease = lock
            .acquire(&n, Duration::from_secs(5), Duration::ZERO)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(lease.fallback(), Some(Fallback::Local), "{url}");
        // exclusion among this process's callers still holds
        assert!(!takes(&*lock, &n).await, "{url}");
        assert!(lock.release(&lease).await.unwrap(), "{url}");
        assert!(takes(&*lock, &n).await, "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proceed_fallback_hands_out_a_lease_every_fence_refuses() {
    let url = format!("{}&fallback=proceed", UNREACHABLE[0]);
    let lock = connect(&url).await.unwrap();
    let n = name();
    let a = take(&lock, &n, Duration::from_secs(5)).await;
    let b = take(&lock, &n, Duration::from_secs(5)).await;
    for lease in [&a, &b] {
        assert_eq!(lease.fallback(), Some(Fallback::Proceed));
        assert_eq!(lease.token().get(), 0, "below every real token");
    }
    assert!(lock.renew(&a).await.is_ok());
    assert!(lock.release(&a).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_is_the_default_and_bad_values_are_refused() {
    let r = connect(UNREACHABLE[0]).await.err();
    assert!(matches!(r, Some(LockError::Unavailable { .. })), "{r:?}");
    let r = connect(&format!("{}&fallback=fail-fast", UNREACHABLE[0]))
        .await
        .err();
    assert!(matches!(r, Some(LockError::Unavailable { .. })), "{r:?}");
    let r = connect("memory://?fallback=maybe").await.err();
    assert!(matches!(r, Some(LockError::Config(_))), "{r:?}");
    // reachable: real leases, no mark
    let lock = connect("memory://?fallback=local").await.unwrap();
    let lease = take(&lock, &name(), Duration::from_secs(5)).await;
    assert_eq!(lease.fallback(), None);
    assert!(lease.token().get() > 0);
}
