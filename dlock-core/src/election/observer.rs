//! Following an election's changes without ever going back in epoch.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Leader;
use crate::{DistributedLock, FencingToken, HolderWatch, LockError, LockInfo, LockName};

/// A stream of leadership changes (see [`super::Election::observe`]): `Some(leader)`
/// when a new leader is seen or the leader proclaims a new value
/// ([`super::Leadership::proclaim`]), `None` when the leadership falls vacant.
///
/// Woken by the backend's notifications where it has them
/// ([`DistributedLock::holder_changed`]); while the leadership is vacant it looks
/// again after 5 ms, doubling to 100 ms. A leader whose epoch is below the newest one
/// reported is never reported (the newest one again only after a vacancy).
pub struct Observer {
    lock: Arc<dyn DistributedLock>,
    name: LockName,
    started: bool,
    last: Option<LockInfo>,
    newest: Option<FencingToken>,
    vacant_pause: Duration,
}

const FIRST_VACANT_PAUSE: Duration = Duration::from_millis(5);
/// The longest single wait on the backend; a change is looked for again after it.
const LONGEST_WAIT: Duration = Duration::from_secs(5);

impl Observer {
    pub(crate) fn new(lock: Arc<dyn DistributedLock>, name: LockName) -> Self {
        Self {
            lock,
            name,
            started: false,
            last: None,
            newest: None,
            vacant_pause: FIRST_VACANT_PAUSE,
        }
    }

    /// The next change: the current state on the first call, then each time the
    /// leadership changes hands or falls vacant.
    ///
    /// # Errors
    /// A backend error; calling again resumes where it stopped.
    ///
    /// # Cancel safety
    /// Dropping it loses nothing: the next call compares against the last reported
    /// state.
    pub async fn next(&mut self) -> Result<Option<Leader>, LockError> {
        loop {
            if self.started {
                self.wait().await?;
            }
            let now = self.lock.inspect(&self.name).await?;
            let first = !self.started;
            self.started = true;
            if let Some(change) = self.judge(now, first) {
                return Ok(change);
            }
        }
    }

    /// The last state reported.
    #[must_use]
    pub fn current(&self) -> Option<Leader> {
        self.last.as_ref().map(Leader::from_info)
    }

    async fn wait(&mut self) -> Result<(), LockError> {
        match &self.last {
            Some(holder) => {
                let until = Instant::now() + LONGEST_WAIT;
                let watch = HolderWatch::new(&self.name, Some(holder), until);
                self.lock.holder_changed(&watch).await
            }
            None => {
                tokio::time::sleep(self.vacant_pause).await;
                self.vacant_pause = (self.vacant_pause * 2).min(crate::HOLDER_POLL);
                Ok(())
            }
        }
    }

    /// What to report for `now`, if anything.
    fn judge(&mut self, now: Option<LockInfo>, first: bool) -> Option<Option<Leader>> {
        match now {
            Some(h) => {
                let newest = self.newest.unwrap_or(FencingToken::new(0));
                let same = self.last.as_ref().is_some_and(|l| l.token == h.token);
                // a stale read of an older leader is never reported; the newest one
                // again only after a vacancy was reported (a read that missed it)
                if self.newest.is_some() && (h.token < newest || (h.token == newest && same)) {
                    if !same {
                        return None;
                    }
                    // the same leader: a value proclaimed since is a change
                    let proclaimed = self.last.as_ref().is_some_and(|l| l.value() != h.value());
                    let leader = Leader::from_info(&h);
                    self.last = Some(h);
                    return proclaimed.then_some(Some(leader));
                }
                self.newest = Some(h.token);
                self.vacant_pause = FIRST_VACANT_PAUSE;
                let leader = Leader::from_info(&h);
                self.last = Some(h);
                Some(Some(leader))
            }
            None if self.last.is_some() || first => {
                self.last = None;
                Some(None)
            }
            None => None,
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("name", &self.name)
            .field("newest", &self.newest)
            .finish_non_exhaustive()
    }
}
