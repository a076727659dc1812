//! `dlock run` at its grant: the holder value said again with the grant's time, and
//! the names as its log lines say them.

use std::time::Duration;

use dlock_any::{LockName, MultiGuard, ProcessHolder};

/// After a wait (this run connected, then waited at least 250 ms), proclaims the
/// holder value again with the grant's time, so `status`, `list` and every waiter count
/// the hold from the grant, not from when this run began to wait. Best effort, one
/// second for all names together: a backend or a lease that cannot proclaim (a
/// semaphore's permit, a read-write side) keeps the value it waited with. Only
/// contended names wait, so only they get the proclaimed value's small record (a
/// Redis key, a SQL row), as an election's name does.
///
/// # Errors
/// `Err` when a proclaim found a lease lost: the command must not start.
pub async fn say_granted(
    backend: &dyn dlock_any::DistributedLock,
    held: &MultiGuard,
    me: &ProcessHolder,
) -> Result<(), ()> {
    if me.age() < Duration::from_millis(250) {
        return Ok(()); // granted at once: the value already says when
    }
    let Ok(value) = me.granted().to_value() else {
        return Ok(());
    };
    let all = async {
        for guard in held.guards() {
            let lease = guard.lease();
            if lease.access() != dlock_any::Access::Exclusive || lease.fallback().is_some() {
                continue;
            }
            match backend.proclaim(&lease, &value).await {
                Err(dlock_any::LockError::LeaseLost { .. }) => return Err(()),
                Err(e) => {
                    tracing::debug!(name = %lease.name(), error = %e, "the grant's time not proclaimed");
                }
                Ok(()) => {}
            }
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(1), all)
        .await
        .unwrap_or(Ok(()))
}

/// `a`, or `a, b and c` for a run holding several names.
pub fn names_text(names: &[LockName]) -> String {
    match names {
        [one] => one.to_string(),
        [rest @ .., last] => format!(
            "{} and {last}",
            rest.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        [] => String::new(),
    }
}
