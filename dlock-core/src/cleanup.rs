//! Clean-ups that must finish before the process exits.
//!
//! A dropped acquisition leaves its queue entry, a dropped guard releases its lease,
//! a failed release is retried: none of that can wait in a `Drop`, so it runs as a
//! task of its own. A process that exits right after (a CLI that timed out, or was
//! told to stop while it waited) would cut those tasks off, and what they were about
//! to delete — a ZooKeeper node, an etcd key — would block everyone behind it until
//! its session or lease ran out. So every such task is counted here, and [`settle`]
//! waits for them: call it last, once the guards and acquisitions are dropped.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! dlock_core::spawn_cleanup(async { /* delete what was left */ });
//! // ... right before the process exits:
//! assert!(dlock_core::settle(Duration::from_secs(5)).await);
//! assert_eq!(dlock_core::pending_cleanups(), 0);
//! # }
//! ```

use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Clean-ups started and not yet finished, in this process.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Woken when the count drops to zero.
fn all_done() -> &'static Notify {
    static DONE: OnceLock<Notify> = OnceLock::new();
    DONE.get_or_init(Notify::new)
}

/// One counted clean-up: uncounted when its task ends, however it ends (finished,
/// panicked, or dropped with its runtime).
struct Counted;

impl Counted {
    fn start() -> Self {
        PENDING.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if PENDING.fetch_sub(1, Ordering::SeqCst) == 1 {
            all_done().notify_waiters();
        }
    }
}

/// Runs `work` as a task of its own on the current tokio runtime, counted until it
/// ends so that [`settle`] can wait for it; `false` (and nothing runs) outside a
/// runtime.
pub fn spawn_cleanup(work: impl Future<Output = ()> + Send + 'static) -> bool {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let counted = Counted::start();
    rt.spawn(async move {
        let _counted = counted;
        work.await;
    });
    true
}

/// How many clean-ups started by [`spawn_cleanup`] are still running.
#[must_use]
pub fn pending_cleanups() -> usize {
    PENDING.load(Ordering::SeqCst)
}

/// Waits until every clean-up started by [`spawn_cleanup`] has ended, or `limit`
/// passed; whether they all ended. A process calls it right before it exits, after
/// dropping its guards and acquisitions (their `Drop` starts the clean-ups).
///
/// # Cancel safety
/// A wait: dropping it changes nothing.
pub async fn settle(limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let woken = all_done().notified();
        tokio::pin!(woken);
        // registered before the count is read, so a last clean-up ending in between
        // still wakes us
        woken.as_mut().enable();
        if pending_cleanups() == 0 {
            return true;
        }
        if tokio::time::timeout_at(deadline, woken).await.is_err() {
            return pending_cleanups() == 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settle_waits_for_a_cleanup_and_gives_up_at_its_limit() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        assert!(spawn_cleanup(async move {
            let _ = rx.await;
        }));
        assert!(pending_cleanups() >= 1);
        assert!(!settle(Duration::from_millis(50)).await, "still running");
        let _ = tx.send(());
        assert!(settle(Duration::from_secs(5)).await);
    }

    #[test]
    fn outside_a_runtime_nothing_is_spawned() {
        assert!(!spawn_cleanup(async {}));
    }
}
