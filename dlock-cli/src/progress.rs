//! Progress while `dlock run` waits: who holds the lock, and for how long yet.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, FencingToken, LockName, OwnerId, format_duration};
use tokio::time::{Instant, sleep};

/// Reports the holder on stderr when it changes, and every 10 s while it does not.
/// Never returns; drop it when the wait ends. Silent when `quiet`.
pub async fn report_holder(
    backend: Arc<dyn DistributedLock>,
    name: LockName,
    quiet: bool,
) -> Infallible {
    let began = Instant::now();
    // an uncontended acquire finishes before anything is printed
    sleep(Duration::from_millis(300)).await;
    let mut last: Option<(OwnerId, FencingToken)> = None;
    let mut printed_at: Option<Instant> = None;
    loop {
        if !quiet {
            match backend.inspect(&name).await {
                Ok(Some(h)) => {
                    let key = (h.owner.clone(), h.token);
                    let stale = printed_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(10));
                    if last.as_ref() != Some(&key) || stale {
                        eprintln!(
                            "dlock: waiting for {name}: held by {} (token {}), {} left",
                            crate::holder::who(&h),
                            h.token,
                            format_duration(h.remaining)
                        );
                        last = Some(key);
                        printed_at = Some(Instant::now());
                    }
                }
                // no single holder to name (a semaphore's or a read-write lock's,
                // or a hand-off under way): still, say the wait goes on
                Ok(None) => {
                    let every = Duration::from_secs(10);
                    if began.elapsed() >= every && printed_at.is_none_or(|t| t.elapsed() >= every) {
                        eprintln!(
                            "dlock: waiting for {name} for {} (`dlock status {name}` shows its holders)",
                            format_duration(began.elapsed())
                        );
                        last = None;
                        printed_at = Some(Instant::now());
                    }
                }
                Err(e) => eprintln!("dlock: waiting for {name}: cannot see the holder: {e}"),
            }
        }
        sleep(Duration::from_secs(1)).await;
    }
}
