//! Renewals of many locks are batched: one script call per renewal tick, not one per
//! lock. Alone in its test binary, so no other test's commands are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, GuardState, LockError, LockName, Locker, random_u64};

/// Script calls (EVALSHA and its EVAL fallback) the server has run so far.
async fn script_calls(url: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_due_together_share_one_script_call() {
    let url = common::redis_url();
    let lock: Arc<dyn DistributedLock> = Arc::new(common::redis(&url).await);
    let prefix = format!("redis/batch/{:016x}", random_u64());
    let ttl = Duration::from_secs(20);

    // 300 held leases and one stale one, renewed all at once.
    let mut leases = Vec::new();
    for i in 0..300 {
        let n = LockName::new(&format!("{prefix}/{i}")).unwrap();
        leases.push(lock.try_acquire(&n, ttl).await.unwrap().unwrap());
    }
    let stale_name = LockName::new(&format!("{prefix}/stale")).unwrap();
    let stale = lock.try_acquire(&stale_name, ttl).await.unwrap().unwrap();
    assert!(lock.release(&stale).await.unwrap());

    let before = script_calls(&url).await;
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases.iter().cloned().chain([stale.clone()]) {
        let lock = Arc::clone(&lock);
        tasks.spawn(async move { (lease.name().clone(), lock.renew(&lease).await) });
    }
    let mut renewed = 0;
    while let Some(r) = tasks.join_next().await {
        let (name, outcome) = r.unwrap();
        if name == stale_name {
            assert!(
                matches!(outcome, Err(LockError::LeaseLost { .. })),
                "{outcome:?}"
            );
        } else {
            outcome.unwrap();
            renewed += 1;
        }
    }
    let calls = script_calls(&url).await - before;
    assert_eq!(renewed, 300);
    assert!(
        calls <= 10,
        "301 concurrent renewals took {calls} script calls"
    );
    for l in &leases {
        assert!(lock.release(l).await.unwrap(), "renewed lease still held");
    }

    // Guards with one TTL renew on a shared grid: over ~4 TTLs, 200 guards renew about
    // 12 times each (2 400 renewals) in a few dozen calls.
    let ttl = Duration::from_millis(900);
    let locker = Locker::new(Arc::clone(&lock)).with_ttl(ttl);
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(locker.lock(format!("{prefix}/guard/{i}")).await.unwrap());
    }
    let before = script_calls(&url).await;
    tokio::time::sleep(ttl * 4).await;
    let calls = script_calls(&url).await - before;
    for g in &guards {
        assert_eq!(g.state(), GuardState::Held);
        assert!(g.is_held());
    }
    for g in guards {
        assert!(g.release().await.unwrap());
    }
    assert!(
        calls <= 100,
        "200 guards over 4 TTLs sent {calls} renewal script calls (unbatched: ~2 400)"
    );
}
