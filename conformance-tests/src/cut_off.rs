//! A holder whose server is cut off from the rest of its cluster (the server still
//! answers the holder) must know its lease is lost before anyone else can hold the
//! lock: its renewals must be confirmed by the cluster, not by the cut-off server.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::{DistributedLock, GuardState, LockName, random_u64};
use tokio::time::Instant;

/// `holder` talks only to the server `cut` isolates; `other` talks to the majority.
/// The holder takes a lock with `ttl` and renews it under a guard; after one TTL the
/// server is cut off; `other` then acquires the lock (once the holder's lease has
/// expired on the majority), and at that moment the holder's guard must say `Lost`.
///
/// # Panics
/// When the holder still believes it holds the lock while `other` holds it, or the
/// majority never hands the lock on.
pub async fn cut_off_holder_is_lost_before_takeover(
    holder: Arc<dyn DistributedLock>,
    other: Arc<dyn DistributedLock>,
    ttl: Duration,
    cut: impl FnOnce(),
) {
    let name = LockName::new(&format!("cut-off/{:016x}", random_u64())).expect("valid name");
    let guard = crate::guarded(&holder, &name, ttl).await;
    let first = guard.token();
    tokio::time::sleep(ttl).await;
    assert_eq!(guard.state(), GuardState::Held, "renewed before the cut");

    cut();
    let at = Instant::now();
    let taken = other
        .acquire(&name, Duration::from_secs(30), Duration::from_secs(20))
        .await
        .expect("the majority hands the lock on once the holder's lease expired");
    let state = guard.state();
    assert!(
        state == GuardState::Lost && !guard.is_held(),
        "another client holds {name} {:?} after the cut while the cut-off holder's guard is {state:?}",
        at.elapsed()
    );
    assert!(taken.token() > first);
    assert!(other.release(&taken).await.expect("release"));
    drop(guard);
}
