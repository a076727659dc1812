//! Data watches on the lock nodes a session renews at scale (see `renewals.rs`).
//!
//! A node read with a watch, and found to be ours, stays as it was read until its
//! watch fires: ZooKeeper fires a data watch when the node is deleted or its data
//! changes, and ends every watch of a session that ends. It delivers the event on the
//! session before the answer to any request the session sends afterwards — also after a
//! reconnection, where the client sets its watches again (`SetWatches`, from the last
//! zxid it saw) before anything else it sends, and the server fires at once those whose
//! node changed in between. So a watch still quiet once a later `sync` has been answered
//! proves what a read behind that `sync` would: the node is still this session's.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use zookeeper_client as zk;

/// The watch on one node: resolves when the watch fires.
type Fired = Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

/// A watch set by a read that found the node this session's.
struct Armed {
    /// The session the watch was set on: a watch of an earlier session says nothing
    /// of the current one.
    session: i64,
    fired: Fired,
}

/// The armed watches of one session's renewal queue, by node path, and the pace of its
/// renewals.
#[derive(Default)]
pub(crate) struct Watches {
    by_path: Mutex<HashMap<String, Armed>>,
    pace: Mutex<Pace>,
}

/// Renewals counted in windows of one lease TTL.
#[derive(Default)]
struct Pace {
    started: Option<Instant>,
    this_window: usize,
    last_window: usize,
}

impl Watches {
    /// Counts `n` renewals; whether the session renews at least `per_ttl` within one
    /// `ttl` (in the window under way or the last one).
    pub(crate) fn at_scale(&self, n: usize, ttl: Duration, per_ttl: usize) -> bool {
        let mut pace = self.pace.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let since = pace.started.map(|s| now.saturating_duration_since(s));
        if since.is_none_or(|d| d >= ttl) {
            // a window with no renewal at all in between counts as none
            pace.last_window = if since.is_some_and(|d| d < ttl * 2) {
                pace.this_window
            } else {
                0
            };
            pace.this_window = 0;
            pace.started = Some(now);
        }
        pace.this_window += n;
        pace.this_window.max(pace.last_window) >= per_ttl
    }

    fn armed(&self) -> MutexGuard<'_, HashMap<String, Armed>> {
        self.by_path.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// For each of `paths`: whether it has a watch set on `session` that has not fired.
    /// Fired watches and those of other sessions are dropped.
    pub(crate) fn quiet<'a>(
        &self,
        session: i64,
        paths: impl Iterator<Item = &'a str>,
    ) -> Vec<bool> {
        let mut armed = self.armed();
        // the event, if delivered, is already in the watch's channel: one poll tells
        let mut cx = Context::from_waker(Waker::noop());
        paths
            .map(|path| {
                let Some(a) = armed.get_mut(path) else {
                    return false;
                };
                let quiet =
                    a.session == session && matches!(a.fired.as_mut().poll(&mut cx), Poll::Pending);
                if !quiet {
                    armed.remove(path);
                }
                quiet
            })
            .collect()
    }

    /// Keeps the watch a read set on `path`, which found the node `session`'s.
    pub(crate) fn arm(&self, session: i64, path: &str, watcher: zk::OneshotWatcher) {
        let armed = Armed {
            session,
            fired: Box::pin(watcher.changed()),
        };
        self.armed().insert(path.to_owned(), armed);
    }

    /// Drops the watch on `path` (released, or found not ours).
    pub(crate) fn forget(&self, path: &str) {
        self.armed().remove(path);
    }
}
