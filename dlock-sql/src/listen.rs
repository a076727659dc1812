//! PostgreSQL's push: one LISTEN connection per `SqlLock` (its own, outside the pool:
//! a client uses at most `pool_size + 1` connections), on two channels.
//!
//! - The table's release channel: a release that found nobody queued names the lock
//!   (observers such as leader watches); the longest
//!   waiter of that name in this process is woken (no herd).
//! - This connection's own grant channel, `dlock_grant_<random>`: a release (or an
//!   attempt that found a crashed holder's lock free) that granted the lock to one of
//!   this process's queued waiters sends `"<owner> <token>"` here (`crate::queue`), and
//!   only that waiter is woken. Queue entries carry the connection's backend pid too,
//!   so a grant is never made to a waiter whose connection is gone.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dlock_core::backend::{OwnedTask, Subscription, WakeupHub};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use crate::queue::{grant_key, parse_grant};

/// The LISTEN connection's task and what it learned.
pub(crate) struct Wakeups {
    hub: Arc<WakeupHub>,
    heard: Arc<Heard>,
    grant_channel: String,
    _listener: OwnedTask,
}

/// What the listening task shares with the waiters.
#[derive(Default)]
struct Heard {
    /// The LISTEN connection's backend pid (0 until known; it changes on reconnect).
    pid: AtomicI64,
    /// Owners whose grant message arrived and who have not looked yet.
    granted: Mutex<HashSet<String>>,
}

impl Wakeups {
    pub(crate) async fn start(
        options: PgConnectOptions,
        release_channel: &str,
    ) -> Result<Arc<Self>, sqlx::Error> {
        // A pool of one, used only to reconnect the listener.
        let own = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .test_before_acquire(false)
            .connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&own).await?;
        listener.ignore_pool_close_event(true);
        let grant_channel = format!("dlock_grant_{:016x}", dlock_core::random_u64());
        let heard = Arc::new(Heard::default());
        heard
            .pid
            .store(backend_pid(&mut listener).await?, Ordering::Relaxed);
        listener
            .listen_all([release_channel, grant_channel.as_str()])
            .await?;
        let hub = WakeupHub::new();
        let task = listen(
            listener,
            Arc::clone(&hub),
            Arc::clone(&heard),
            grant_channel.clone(),
        );
        Ok(Arc::new(Self {
            hub,
            heard,
            grant_channel,
            _listener: OwnedTask::spawn(task),
        }))
    }

    /// A wake-up for releases of `key` (a lock name) or for a grant
    /// (`crate::queue::grant_key`).
    pub(crate) fn join(&self, key: &str) -> Subscription {
        self.hub.join(key, None).0
    }

    /// Where a queued waiter's grant goes: the LISTEN connection's pid and channel
    /// (`None` while the pid is unknown: the waiter polls meanwhile).
    pub(crate) fn grant_listener(&self) -> Option<(i64, String)> {
        let pid = self.heard.pid.load(Ordering::Relaxed);
        (pid != 0).then(|| (pid, self.grant_channel.clone()))
    }

    /// Whether `owner`'s grant message arrived since it last looked.
    pub(crate) fn take_granted(&self, owner: &str) -> bool {
        self.heard.granted().remove(owner)
    }
}

impl Heard {
    fn granted(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.granted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn backend_pid(listener: &mut PgListener) -> Result<i64, sqlx::Error> {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(listener)
        .await?;
    Ok(i64::from(pid))
}

/// The listening loop: fans notifications out to the waiters.
async fn listen(
    mut listener: PgListener,
    hub: Arc<WakeupHub>,
    heard: Arc<Heard>,
    grant_channel: String,
) {
    loop {
        // try_recv, not recv: recv reconnects silently, and the notifications sent
        // while the connection was down are gone without a trace.
        match listener.try_recv().await {
            Ok(Some(n)) if n.channel() == grant_channel => {
                if let Some((owner, _token)) = parse_grant(n.payload()) {
                    heard.granted().insert(owner.to_owned());
                    hub.wake_one(&grant_key(owner));
                }
            }
            Ok(Some(n)) => hub.wake_one(n.payload()),
            Ok(None) => {
                // Reconnected (and listening again) on a new backend: whatever was
                // sent while the connection was down was not heard, so everyone looks
                // again, and waiters give the new pid with their next attempt.
                tracing::info!("LISTEN connection was lost and is back; waking every waiter");
                match backend_pid(&mut listener).await {
                    Ok(pid) => heard.pid.store(pid, Ordering::Relaxed),
                    Err(e) => tracing::warn!(error = %e, "reading the LISTEN backend's pid failed"),
                }
                hub.wake_all();
            }
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; reconnecting");
                heard.pid.store(0, Ordering::Relaxed);
                hub.wake_all();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
