//! PostgreSQL's push: one LISTEN connection per `SqlLock` (its own, outside the pool:
//! a client uses at most `pool_size + 1` connections), on two channels.
//!
//! - The table's release channel: a release that found nobody queued names the lock
//!   (observers such as leader watches); the longest
//!   waiter of that name in this process is woken (no herd).
//! - This connection's own grant channel, `dlock_grant_<random>`: a release (or an
//!   attempt that found a crashed holder's lock free) that granted the lock to one of
//!   this process's queued waiters sends `"<owner> <token>"` here (`crate::queue`): the
//!   message is kept in that waiter's grant slot (`dlock_core::backend::grants`, which
//!   decides when it may be taken as the lock) and only that waiter is woken.
//!
//! The connection holds a session advisory lock on a random key of its own, its
//! *mark*, for as long as it lives; queue entries carry the mark, and the queue's
//! statements pass over an entry whose mark nobody holds (the server released it when
//! the connection closed: a killed process), so a grant is never made to a waiter
//! whose connection is gone. Testing a mark is a lock-table probe
//! (`pg_try_advisory_xact_lock_shared`), not a read of every backend's status.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use dlock_core::backend::grants::GrantSlots;
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
struct Heard {
    /// The mark the LISTEN connection holds (0 while it holds none; a new one after a
    /// reconnect).
    mark: AtomicI64,
    /// The grant messages, by owner id (the `SqlLock`'s own slots).
    grants: Arc<GrantSlots>,
}

impl Wakeups {
    pub(crate) async fn start(
        options: PgConnectOptions,
        release_channel: &str,
        grants: Arc<GrantSlots>,
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
        let heard = Arc::new(Heard {
            mark: AtomicI64::new(0),
            grants,
        });
        heard
            .mark
            .store(hold_mark(&mut listener).await?, Ordering::Relaxed);
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

    /// Where a queued waiter's grant goes: the LISTEN connection's mark and channel
    /// (`None` while it holds no mark: the waiter polls meanwhile).
    pub(crate) fn grant_listener(&self) -> Option<(i64, String)> {
        let mark = self.heard.mark.load(Ordering::Relaxed);
        (mark != 0).then(|| (mark, self.grant_channel.clone()))
    }
}

/// Takes a new random mark on the LISTEN connection (a session advisory lock, held
/// until the connection closes).
async fn hold_mark(listener: &mut PgListener) -> Result<i64, sqlx::Error> {
    loop {
        // (64 random bits: no other session holds it; 0 means "no mark")
        let mark = i64::from_ne_bytes(dlock_core::random_u64().to_ne_bytes());
        if mark == 0 {
            continue;
        }
        let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(mark)
            .fetch_one(&mut *listener)
            .await?;
        if held {
            return Ok(mark);
        }
    }
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
                if let Some((owner, token)) = parse_grant(n.payload()) {
                    if let Ok(token) = u64::try_from(token) {
                        heard.grants.deliver(owner, token);
                    }
                    hub.wake_one(&grant_key(owner));
                }
            }
            Ok(Some(n)) => hub.wake_one(n.payload()),
            Ok(None) => {
                // Reconnected (and listening again) on a new backend: whatever was
                // sent while the connection was down was not heard, so everyone looks
                // again, and waiters give the new mark with their next attempt.
                heard.grants.forget_grants();
                tracing::info!("LISTEN connection was lost and is back; waking every waiter");
                match hold_mark(&mut listener).await {
                    Ok(mark) => heard.mark.store(mark, Ordering::Relaxed),
                    Err(e) => {
                        heard.mark.store(0, Ordering::Relaxed);
                        tracing::warn!(error = %e, "taking the LISTEN connection's mark failed");
                    }
                }
                hub.wake_all();
            }
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; reconnecting");
                heard.mark.store(0, Ordering::Relaxed);
                heard.grants.forget_grants();
                hub.wake_all();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
