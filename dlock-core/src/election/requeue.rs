//! `Election::serve`: campaign, lead, and campaign again (Curator's `LeaderSelector`
//! with `autoRequeue`).

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::Election;
use crate::{Backoff, FencingToken, LockError};

/// The first pause before campaigning again after a short leadership.
pub(super) const REQUEUE_PAUSE: Duration = Duration::from_millis(200);
/// The shortest first pause: a leader whose work returns at once must not turn its
/// candidacy into a stream of campaigns and resignations.
const MIN_REQUEUE_PAUSE: Duration = Duration::from_millis(10);

impl Election {
    /// Sets the first pause before [`Election::serve`] campaigns again after a
    /// leadership that ended within a TTL (it doubles, with jitter, up to the TTL, while
    /// leaderships keep ending that fast); a leadership that lasted a TTL or more is
    /// followed by no pause beyond that first one. At least 10 ms (a shorter one is
    /// raised to it).
    #[must_use]
    pub fn with_requeue_pause(mut self, pause: Duration) -> Self {
        self.requeue_pause = pause.max(MIN_REQUEUE_PAUSE);
        self
    }

    /// Stands as a candidate for good: campaigns, runs `work(epoch)` while leading, and
    /// campaigns again when the leadership ends — the work returned (the leadership is
    /// resigned, so the next candidate leads at once) or the leadership was lost (the
    /// work's future is dropped first, as [`crate::Locker::with_lock`] drops it).
    /// Outages are waited out, as [`Election::campaign`] waits them out. It never
    /// returns `Ok`; drop the future to stop standing (a leadership held then is
    /// released in the background).
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use dlock_core::{Election, MemoryLock};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let election = Election::new(Arc::new(MemoryLock::new()), "scheduler")
    ///     .expect("name")
    ///     .with_ttl(Duration::from_secs(10));
    /// let (tx, mut epochs) = tokio::sync::mpsc::unbounded_channel();
    /// let standing = tokio::spawn(async move {
    ///     election
    ///         .serve("10.0.0.7:8080", |epoch| {
    ///             let tx = tx.clone();
    ///             async move {
    ///                 // lead: schedule jobs, passing `epoch` with every write…
    ///                 let _ = tx.send(epoch);
    ///             } // …and step down by returning: serve campaigns again
    ///         })
    ///         .await
    /// });
    /// let (first, second) = (epochs.recv().await, epochs.recv().await);
    /// assert!(second > first, "every leadership has a new epoch");
    /// standing.abort();
    /// # }
    /// ```
    ///
    /// # Errors
    /// Those of [`Election::campaign`] that retrying cannot cure (a bad value or TTL,
    /// a backend that cannot store a value).
    ///
    /// # Cancel safety
    /// Dropping it drops the work and the leadership (released in the background) or
    /// the candidacy.
    pub async fn serve<F, Fut>(&self, value: &str, mut work: F) -> Result<Infallible, LockError>
    where
        F: FnMut(FencingToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut pause = Backoff::new(self.requeue_pause, self.ttl.max(self.requeue_pause));
        loop {
            let leadership = self.campaign(value).await?;
            let (epoch, started) = (leadership.epoch(), Instant::now());
            let lost = leadership.lost();
            tokio::select! {
                biased;
                () = lost => {
                    tracing::warn!(election = %self.name, %epoch, "leadership lost; the work was stopped, campaigning again");
                    // owner-checked: harmless if another candidate leads by now
                    let _ = leadership.resign().await;
                }
                () = work(epoch) => {
                    if let Err(e) = leadership.resign().await {
                        tracing::warn!(election = %self.name, %epoch, error = %e, "resigning failed; the leadership ends by its TTL");
                    }
                }
            }
            if started.elapsed() >= self.ttl {
                pause = Backoff::new(self.requeue_pause, self.ttl.max(self.requeue_pause));
            }
            tokio::time::sleep(pause.next_delay(None)).await;
        }
    }
}
