//! Renewals of many locks are batched: one script call per renewal tick, not one per
//! lock. Alone in its test binary, so no other test's commands are counted.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use dlock_conformance::batching;

/// Script calls (EVALSHA and its EVAL fallback) the server has run so far.
async fn script_calls(url: String) -> u64 {
    let info: redis::InfoDict = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut common::raw(&url).await)
        .await
        .unwrap();
    // each line reads `cmdstat_evalsha:calls=12,usec=…`; EVAL only shows once called
    let calls = |command: &str| -> Option<u64> {
        let stats: String = info.get(command)?;
        let calls = stats.strip_prefix("calls=")?.split(',').next()?;
        Some(calls.parse().expect("a count of calls"))
    };
    let by_sha = calls("cmdstat_evalsha").expect("the locks were taken by EVALSHA");
    by_sha + calls("cmdstat_eval").unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_due_together_share_one_script_call() {
    let url = common::redis_url();
    let lock = common::redis_dyn(&url).await;
    let calls = || script_calls(url.clone());

    let used =
        batching::concurrent_renewals(Arc::clone(&lock), 300, Duration::from_secs(20), calls).await;
    assert!(
        used <= 10,
        "301 concurrent renewals took {used} script calls"
    );

    let (ttl, hold) = (Duration::from_millis(900), Duration::from_millis(3600));
    let used = batching::renewing_guards(lock, 200, ttl, hold, calls).await;
    assert!(
        used <= 100,
        "200 guards over 4 TTLs sent {used} renewal script calls (unbatched: ~{})",
        batching::unbatched(200, ttl, hold)
    );
}
