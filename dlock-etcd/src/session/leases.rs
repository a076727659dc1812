//! The RPC side of shared leases: granting, refreshing (keep-alive plus a check of
//! which keys are still attached), all behind one refresh at a time per lease.

use std::collections::HashSet;
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::millis;
use etcd_client::LeaseTimeToLiveOptions;
use tokio::time::Instant;

use crate::EtcdLock;
use crate::errors::is_lease_not_found;
use crate::session::bookkeeping::SharedLeases;

/// Marks lease `id`'s attached-keys read as finished when dropped.
struct CheckDone<'a>(&'a SharedLeases, i64);

impl Drop for CheckDone<'_> {
    fn drop(&mut self) {
        self.0.check_done(self.1);
    }
}

/// A lease an acquisition hangs its key on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedLease {
    pub id: i64,
    pub granted: Duration,
    pub refreshed: Instant,
}

impl EtcdLock {
    /// The shared lease for `ttl` (whole seconds, rounded up; the server may raise it
    /// to its minimum): the current one if at least two thirds of its TTL are left
    /// (refreshed in the background once it is past a sixth), else a new grant.
    pub(crate) async fn lease_for(&self, ttl: Duration) -> Result<SharedLease, LockError> {
        let secs = (millis(ttl).saturating_add(999) / 1000).max(1);
        let (usable, refresh) = self.leases.usable(secs);
        if refresh {
            self.refresh_in_background(secs);
        }
        if let Some(u) = usable {
            return Ok(SharedLease {
                id: u.id,
                granted: u.granted,
                refreshed: u.refreshed,
            });
        }
        let refreshed = Instant::now();
        let resp = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?;
        let granted = Duration::from_secs(u64::try_from(resp.ttl()).unwrap_or(0));
        self.leases.install(secs, resp.id(), granted, refreshed);
        Ok(SharedLease {
            id: resp.id(),
            granted,
            refreshed,
        })
    }

    fn refresh_in_background(&self, secs: i64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.leases.refresh_done(secs);
            return;
        };
        let lock = self.clone();
        rt.spawn(async move {
            if let Some(id) = lock.leases.current(secs) {
                let _ = lock.refresh_once(id).await;
            }
            lock.leases.refresh_done(secs);
        });
    }

    /// Makes sure lease `id` was refreshed within the last grid step: the first caller
    /// of a tick sends the keep-alive, the others find it fresh.
    pub(crate) async fn refresh_shared(
        &self,
        id: i64,
        gate: &tokio::sync::Mutex<()>,
    ) -> Result<(), LockError> {
        let asked = Instant::now();
        let _one_at_a_time = gate.lock().await;
        if self.leases.recently_refreshed(id) {
            return Ok(());
        }
        if self.leases.failed_since(id, asked) {
            return Err(LockError::transient(
                "keep-alive of the shared etcd lease failed",
            ));
        }
        // boxed: every renewal waiting at the gate would otherwise carry the space of a
        // whole in-flight RPC
        let outcome = Box::pin(self.refresh_once(id)).await;
        if outcome.is_err() {
            self.leases.refresh_failed(id);
        }
        outcome
    }

    /// One keep-alive, then in the background a read of the keys still attached to the
    /// lease (a key deleted by someone else is no longer held). The renewals waiting
    /// for this refresh wait for the keep-alive only: the read grows with the keys on
    /// the lease, and at thousands of keys it took longer than the TTL.
    async fn refresh_once(&self, id: i64) -> Result<(), LockError> {
        let sent = Instant::now();
        if !self.keep_alive(id).await? {
            self.leases.dead(id);
            return Ok(());
        }
        self.leases.refreshed(id, sent);
        if self.leases.start_check(id) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let lock = self.clone();
                    rt.spawn(async move { lock.check_attached(id).await });
                }
                Err(_) => self.leases.check_done(id),
            }
        }
        Ok(())
    }

    /// Reads the keys attached to lease `id` and forgets the confirmed ones missing
    /// from it. A failed read is not a failed renewal: the next refresh reads again.
    async fn check_attached(&self, id: i64) {
        // done even if this task is dropped halfway (a runtime shutting down)
        let _done = CheckDone(&self.leases, id);
        let sent = Instant::now();
        match self.attached_keys(id).await {
            Ok(Some(keys)) => {
                self.leases
                    .attached(id, sent, &keys, Instant::now() + self.opts.timeout);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(lease = id, error = %e, "reading the keys attached to a shared etcd lease failed; a key deleted or moved behind its holder's back is noticed at the next read, and a lock whose key goes unread for two TTLs is no longer trusted");
            }
        }
    }

    /// The keys attached to lease `id`, or `None` if the server does not know it.
    async fn attached_keys(&self, id: i64) -> Result<Option<HashSet<String>>, LockError> {
        let resp = self
            .rpc("lease keys", |mut c| async move {
                c.lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
                    .await
            })
            .await?;
        if resp.ttl() < 0 {
            return Ok(None);
        }
        Ok(Some(
            resp.keys()
                .iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect(),
        ))
    }

    /// Sends one keep-alive. `Ok(false)` when the lease is gone.
    pub(crate) async fn keep_alive(&self, id: i64) -> Result<bool, LockError> {
        match self
            .rpc(
                "keep-alive",
                |mut c| async move { c.lease_keep_alive(id).await },
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(
                LockError::Backend {
                    source: Some(src), ..
                }
                | LockError::Unavailable {
                    source: Some(src), ..
                },
            ) if src
                .downcast_ref::<etcd_client::Error>()
                .is_some_and(is_lease_not_found) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}
