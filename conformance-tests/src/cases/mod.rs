//! The conformance cases, each a `pub async fn(&impl Harness)`.

mod basics;
mod expiry;
mod fencing;
mod names;
mod network;
mod waiting;
mod workload;

pub use basics::*;
pub use expiry::*;
pub use fencing::*;
pub use names::*;
pub use network::*;
pub use waiting::*;
pub use workload::*;

use std::time::Duration;

use dlock_core::{DistributedLock, Lease, LockName, random_u64};

/// A TTL long enough that no case sees it expire by accident.
pub(crate) const LONG_TTL: Duration = Duration::from_secs(30);

/// A fresh lock name per case run, so cases never see each other's locks.
pub(crate) fn unique(case: &str) -> LockName {
    LockName::new(&format!("conformance/{case}/{:016x}", random_u64())).expect("valid name")
}

/// Asserts rule 5: a lease is handed out only while it is still valid.
pub(crate) fn assert_fresh(lease: &Lease) {
    assert!(
        lease.is_valid(),
        "a lease was returned after its valid_until: {lease:?}"
    );
}

/// Takes a free lock or fails the case.
pub(crate) async fn take(client: &dyn DistributedLock, name: &LockName, ttl: Duration) -> Lease {
    let lease = client
        .try_acquire(name, ttl)
        .await
        .expect("try_acquire must not fail")
        .unwrap_or_else(|| panic!("lock {name} should be free"));
    assert_fresh(&lease);
    lease
}

/// Polls `try_acquire` until it succeeds or `within` passes.
pub(crate) async fn take_within(
    client: &dyn DistributedLock,
    name: &LockName,
    ttl: Duration,
    within: Duration,
) -> Option<Lease> {
    let end = tokio::time::Instant::now() + within;
    loop {
        if let Some(lease) = client.try_acquire(name, ttl).await.expect("try_acquire") {
            assert_fresh(&lease);
            return Some(lease);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
