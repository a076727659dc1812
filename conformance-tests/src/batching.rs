//! Workloads for backends that declare `Capabilities::batched_renewals`: many
//! renewals due at once, whose cost the caller counts with the server's own statistics
//! (script calls, gRPC messages, packets) — batched, it is a few requests, not one per
//! lock.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, GuardState, LockError, LockName, Locker, random_u64};

fn prefix(case: &str) -> String {
    format!("batching/{case}/{:016x}", random_u64())
}

/// Takes `n` locks and one more that it releases again, then renews all `n + 1`
/// leases at once: the `n` must renew and the released one must be lost. Returns how
/// many requests the server received meanwhile, by `requests` (a reading of the
/// server's running total), and releases the locks.
pub async fn concurrent_renewals<F, Fut>(
    lock: Arc<dyn DistributedLock>,
    n: usize,
    ttl: Duration,
    requests: F,
) -> u64
where
    F: Fn() -> Fut,
    Fut: Future<Output = u64>,
{
    let prefix = prefix("concurrent");
    let mut leases = Vec::with_capacity(n);
    for i in 0..n {
        let name = LockName::new(&format!("{prefix}/{i}")).expect("valid name");
        leases.push(crate::cases::take(&*lock, &name, ttl).await);
    }
    let stale_name = LockName::new(&format!("{prefix}/stale")).expect("valid name");
    let stale = crate::cases::take(&*lock, &stale_name, ttl).await;
    assert!(lock.release(&stale).await.expect("release"));

    let before = requests().await;
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases.iter().cloned().chain([stale]) {
        let lock = Arc::clone(&lock);
        tasks.spawn(async move { (lease.name().clone(), lock.renew(&lease).await) });
    }
    let mut renewed = 0;
    while let Some(joined) = tasks.join_next().await {
        let (name, outcome) = joined.expect("renewal task");
        if name == stale_name {
            assert!(
                matches!(outcome, Err(LockError::LeaseLost { .. })),
                "renewal of a released lease: {outcome:?}"
            );
        } else {
            assert!(outcome.expect("renew a held lease").is_valid());
            renewed += 1;
        }
    }
    let used = requests().await.saturating_sub(before);
    assert_eq!(renewed, n);
    for l in &leases {
        assert!(
            lock.release(l).await.expect("release"),
            "renewed lease still held"
        );
    }
    used
}

/// Holds `n` renewing guards with `ttl` for `hold`: every one must still be held at the
/// end. Returns how many requests the server received during the hold, and releases.
pub async fn renewing_guards<F, Fut>(
    lock: Arc<dyn DistributedLock>,
    n: usize,
    ttl: Duration,
    hold: Duration,
    requests: F,
) -> u64
where
    F: Fn() -> Fut,
    Fut: Future<Output = u64>,
{
    let prefix = prefix("guards");
    let locker = Locker::new(lock).with_ttl(ttl);
    let mut guards = Vec::with_capacity(n);
    for i in 0..n {
        guards.push(locker.lock(format!("{prefix}/{i}")).await.expect("lock"));
    }
    let before = requests().await;
    tokio::time::sleep(hold).await;
    let used = requests().await.saturating_sub(before);
    for g in &guards {
        assert_eq!(g.state(), GuardState::Held);
        assert!(g.is_held());
    }
    for g in guards {
        assert!(g.release().await.expect("release"));
    }
    used
}

/// The renewals `n` guards with `ttl` make in `hold` if each went on its own (one
/// every third of the TTL), for messages.
#[must_use]
pub fn unbatched(n: usize, ttl: Duration, hold: Duration) -> u64 {
    let per_guard = hold.as_secs_f64() / (ttl.as_secs_f64() / 3.0);
    (n as f64 * per_guard) as u64
}
