//! The lock algorithm: a lease per acquisition, a queue of keys ordered by create
//! revision, a watch on the immediate predecessor.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dlock_core::{
    Capabilities, Deadline, DistributedLock, FencingToken, Lease, LeaseScope, LockError, LockInfo,
    LockName, OwnerId, drift_margin, validate_ttl,
};
use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse, TxnResponse,
};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::errors::is_lease_not_found;
use crate::keys::{owner_of, queue_dir};
use crate::pool::{Assigned, Idle};

/// What an etcd lease carries inside a [`Lease`].
#[derive(Debug)]
struct Held {
    lease_id: i64,
}

/// A granted etcd lease not yet handed to the caller: revoked (which deletes the queue
/// key attached to it) if the acquisition fails, times out or is dropped.
struct PendingLease {
    lock: EtcdLock,
    id: i64,
    armed: bool,
}

impl PendingLease {
    /// Hands the lease to the caller's lock: it now backs the key created at `revision`.
    fn keep(mut self, secs: i64, revision: i64, granted: Duration, refreshed: Instant) -> i64 {
        self.armed = false;
        self.lock.pool.assign(
            self.id,
            Assigned {
                secs,
                revision,
                granted,
                refreshed,
            },
        );
        self.id
    }
}

impl Drop for PendingLease {
    fn drop(&mut self) {
        if self.armed {
            self.lock.revoke_in_background(self.id);
        }
    }
}

fn first_by_create() -> GetOptions {
    GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1)
}

fn gets(resp: &TxnResponse) -> Vec<Vec<KeyValue>> {
    resp.op_responses()
        .into_iter()
        .filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g.kvs().to_vec()),
            _ => None,
        })
        .collect()
}

/// The create revision of the lease's key: its fencing token.
fn revision(lease: &Lease) -> i64 {
    i64::try_from(lease.token().get()).unwrap_or(i64::MAX)
}

fn token(rev: i64) -> Result<FencingToken, LockError> {
    u64::try_from(rev)
        .map(FencingToken::new)
        .map_err(|_| LockError::Backend {
            message: format!("negative create revision {rev}"),
            source: None,
        })
}

impl EtcdLock {
    pub(crate) fn revoke_in_background(&self, id: i64) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let lock = self.clone();
            rt.spawn(async move {
                let _ = lock
                    .rpc("revoke", |mut c| async move { c.lease_revoke(id).await })
                    .await;
            });
        }
    }

    /// A lease for `ttl` (whole seconds, rounded up; the server may raise it to its
    /// minimum): an idle one from the pool if one is fresh, else a new grant; a fresh
    /// idle lease is prepared in the background before the pool runs dry. Returns it
    /// with the pool key (seconds asked for), the TTL granted and the time it was last
    /// refreshed.
    async fn grant(
        &self,
        ttl: Duration,
    ) -> Result<(PendingLease, i64, Duration, Instant), LockError> {
        let secs = i64::try_from(ttl.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1);
        let taken = self.pool.take(secs);
        for id in taken.stale {
            self.revoke_in_background(id);
        }
        if taken.refill {
            self.refill(secs);
        }
        let (id, granted, refreshed) = match taken.lease {
            Some(l) => (l.id, l.granted, l.refreshed),
            None => self.grant_now(secs).await?,
        };
        let pending = PendingLease {
            lock: self.clone(),
            id,
            armed: true,
        };
        Ok((pending, secs, granted, refreshed))
    }

    async fn grant_now(&self, secs: i64) -> Result<(i64, Duration, Instant), LockError> {
        let sent = Instant::now();
        let resp = self
            .rpc("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?;
        Ok((
            resp.id(),
            Duration::from_secs(u64::try_from(resp.ttl()).unwrap_or(0)),
            sent,
        ))
    }

    /// Grants a lease for `secs` in the background and puts it in the pool (the pool
    /// has marked the refill as started).
    fn refill(&self, secs: i64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let _ = self.pool.refilled(secs, None);
            return;
        };
        let lock = self.clone();
        rt.spawn(async move {
            let idle = lock
                .grant_now(secs)
                .await
                .ok()
                .map(|(id, granted, refreshed)| Idle {
                    id,
                    granted,
                    refreshed,
                });
            if let Some(extra) = lock.pool.refilled(secs, idle) {
                lock.revoke_in_background(extra);
            }
        });
    }

    /// Sends one keep-alive. `Ok(false)` when the lease is gone.
    async fn keep_alive(&self, id: i64) -> Result<bool, LockError> {
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

    async fn first_in_queue(&self, dir: &str) -> Result<Option<KeyValue>, LockError> {
        let dir = dir.to_owned();
        let resp = self
            .rpc("read queue", |mut c| {
                let dir = dir.clone();
                async move { c.get(dir, Some(first_by_create())).await }
            })
            .await?;
        Ok(resp.kvs().first().cloned())
    }

    /// The key queued right before `my_rev`, if any.
    async fn predecessor(&self, dir: &str, my_rev: i64) -> Result<Option<KeyValue>, LockError> {
        let dir = dir.to_owned();
        let resp = self
            .rpc("read predecessor", |mut c| {
                let dir = dir.clone();
                async move {
                    let opts = GetOptions::new()
                        .with_prefix()
                        .with_max_create_revision(my_rev - 1)
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(1);
                    c.get(dir, Some(opts)).await
                }
            })
            .await?;
        Ok(resp.kvs().first().cloned())
    }

    /// One txn that creates `key` only if nobody holds or waits for the lock (waiters
    /// keep their place in line), and otherwise reads our key (a put may have landed
    /// before a lost reply) and the head of the queue.
    async fn take_if_free(&self, dir: &str, key: &str, id: i64) -> Result<TxnResponse, LockError> {
        self.rpc("take if free", |mut c| {
            let (dir, key) = (dir.to_owned(), key.to_owned());
            async move {
                let txn = Txn::new()
                    .when([Compare::version(dir.clone(), CompareOp::Equal, 0).with_prefix()])
                    .and_then([TxnOp::put(
                        key.clone(),
                        "",
                        Some(PutOptions::new().with_lease(id)),
                    )])
                    .or_else([
                        TxnOp::get(key, None),
                        TxnOp::get(dir, Some(first_by_create())),
                    ]);
                c.txn(txn).await
            }
        })
        .await
    }

    /// The queue key of the lease's holder.
    fn holder_key(&self, lease: &Lease) -> String {
        format!(
            "{}{}",
            queue_dir(&self.opts.prefix, lease.name()),
            lease.owner()
        )
    }

    /// Whether `key` exists and was created at `rev`.
    async fn key_has_revision(&self, key: &str, rev: i64) -> Result<bool, LockError> {
        let key = key.to_owned();
        let resp = self
            .rpc("read key", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(resp
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev))
    }

    async fn key_exists(&self, key: &[u8]) -> Result<bool, LockError> {
        let key = key.to_vec();
        let resp = self
            .rpc("read key", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(!resp.kvs().is_empty())
    }

    /// Waits until the predecessor's key is deleted, keeping our own lease alive
    /// meanwhile. Returns the new refresh time, or `Err(Timeout)` at the deadline.
    async fn wait_for_delete(
        &self,
        name: &LockName,
        pred: &[u8],
        lease_id: i64,
        granted: Duration,
        mut refreshed: Instant,
        deadline: &Deadline,
    ) -> Result<Instant, LockError> {
        // Watch from now, then look again: a watch from a past revision is served by
        // etcd's catch-up loop, which runs only every 100 ms.
        let pred_key = pred.to_vec();
        let mut watch = self
            .rpc("watch", |mut c| {
                let k = pred_key.clone();
                async move { c.watch(k, None).await }
            })
            .await?;
        if !self.key_exists(pred).await? {
            return Ok(refreshed);
        }
        loop {
            let next_refresh = refreshed + granted / 3;
            tokio::select! {
                msg = watch.message() => match msg {
                    Ok(Some(resp)) if !resp.canceled()
                        && !resp.events().iter().any(|e| e.event_type() == EventType::Delete) => {}
                    // deleted, cancelled, or the stream broke: look again either way
                    _ => return Ok(refreshed),
                },
                () = tokio::time::sleep_until(next_refresh) => {
                    let sent = Instant::now();
                    if !self.keep_alive(lease_id).await? {
                        return Err(LockError::Unavailable {
                            message: format!("the lease of the queued request for {name} expired while waiting"),
                            source: None,
                        });
                    }
                    refreshed = sent;
                }
                () = tokio::time::sleep_until(deadline.end()) => {
                    return Err(LockError::Timeout { name: name.to_string(), waited: deadline.waited() });
                }
            }
        }
    }
}

#[async_trait]
impl DistributedLock for EtcdLock {
    async fn try_acquire(
        &self,
        name: &LockName,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        validate_ttl(ttl)?;
        let owner = OwnerId::random()?;
        let dir = queue_dir(&self.opts.prefix, name);
        let key = format!("{dir}{owner}");
        let (pending, secs, granted, sent) = self.grant(ttl).await?;
        let id = pending.id;
        let resp = self.take_if_free(&dir, &key, id).await?;
        let my_rev = if resp.succeeded() {
            resp.header().map_or(0, |h| h.revision())
        } else {
            // our own put may have landed before a lost reply: then we are first in line
            let g = gets(&resp);
            let mine = g
                .first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            let first = g
                .get(1)
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision);
            match (mine, first) {
                (Some(m), Some(f)) if m == f => m,
                // Busy. The lease is revoked rather than pooled: a put retried after a
                // lost reply might still land later, and revoking removes it then too.
                _ => return Ok(None),
            }
        };
        let lease = Lease::new(name.clone(), owner, token(my_rev)?, granted, sent)
            .with_backend_data(Arc::new(Held { lease_id: id }));
        if !lease.is_valid() {
            return Ok(None);
        }
        pending.keep(secs, my_rev, granted, sent);
        Ok(Some(lease))
    }

    async fn acquire(
        &self,
        name: &LockName,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, LockError> {
        validate_ttl(ttl)?;
        let owner = OwnerId::random()?;
        let deadline = Deadline::after(wait);
        let dir = queue_dir(&self.opts.prefix, name);
        let key = format!("{dir}{owner}");
        let (pending, secs, granted, sent) = self.grant(ttl).await?;
        let id = pending.id;
        // One txn: a free lock is taken as `try_acquire` takes it (no read needed); a busy
        // one is queued by a nested txn that also reads the head of the queue. Retried
        // after a lost reply, it finds our key instead.
        let resp = self
            .rpc("enqueue", |mut c| {
                let (dir, key) = (dir.clone(), key.clone());
                async move {
                    let queue = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([
                            TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(id))),
                            TxnOp::get(dir.clone(), Some(first_by_create())),
                        ])
                        .or_else([
                            TxnOp::get(key.clone(), None),
                            TxnOp::get(dir.clone(), Some(first_by_create())),
                        ]);
                    let txn = Txn::new()
                        .when([Compare::version(dir, CompareOp::Equal, 0).with_prefix()])
                        .and_then([TxnOp::put(key, "", Some(PutOptions::new().with_lease(id)))])
                        .or_else([TxnOp::txn(queue)]);
                    c.txn(txn).await
                }
            })
            .await?;
        let took_free = resp.succeeded();
        let revision = resp.header().map_or(0, |h| h.revision());
        let (queued, g) = match resp.op_responses().into_iter().next() {
            Some(TxnOpResponse::Txn(inner)) => (inner.succeeded(), gets(&inner)),
            _ => (false, Vec::new()),
        };
        let my_rev = if took_free || queued {
            revision
        } else {
            g.first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision)
                .ok_or_else(|| LockError::Unavailable {
                    message: format!("the queued request for {name} vanished"),
                    source: None,
                })?
        };
        let mut head = if took_free {
            Some(my_rev)
        } else {
            g.last()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision)
        };
        let mut refreshed = sent;
        loop {
            if head == Some(my_rev) {
                let mut lease = Lease::new(
                    name.clone(),
                    owner.clone(),
                    token(my_rev)?,
                    granted,
                    refreshed,
                );
                if !lease.is_valid() {
                    // waited long: refresh so the caller gets a full, trustworthy lease
                    let at = Instant::now();
                    if !self.keep_alive(id).await? {
                        return Err(LockError::Unavailable {
                            message: format!(
                                "the lease for {name} expired before it was handed out"
                            ),
                            source: None,
                        });
                    }
                    lease = lease.renewed(granted, at);
                }
                // after waiting, make sure our key (and so our lease) still exists
                if refreshed != sent && !self.key_exists(key.as_bytes()).await? {
                    return Err(LockError::Unavailable {
                        message: format!("the queued request for {name} expired while waiting"),
                        source: None,
                    });
                }
                let refreshed = lease.valid_until() - (granted - drift_margin(granted));
                let lease = lease.with_backend_data(Arc::new(Held {
                    lease_id: pending.keep(secs, my_rev, granted, refreshed),
                }));
                return Ok(lease);
            }
            if deadline.passed() {
                return Err(LockError::Timeout {
                    name: name.to_string(),
                    waited: deadline.waited(),
                });
            }
            if let Some(pred) = self.predecessor(&dir, my_rev).await? {
                refreshed = self
                    .wait_for_delete(name, pred.key(), id, granted, refreshed, &deadline)
                    .await?;
            }
            head = self
                .first_in_queue(&dir)
                .await?
                .map(|kv| kv.create_revision());
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Err(LockError::lease_lost(lease.name()));
        };
        let (id, rev) = (held.lease_id, revision(lease));
        let lost = || Err(LockError::lease_lost(lease.name()));
        let ours = match self.pool.assigned(id) {
            Some(a) if a.revision == rev => true,
            // the lease was taken back and now backs a newer lock, or waits in the pool
            Some(_) => return lost(),
            None if self.pool.is_idle(id) => return lost(),
            // handed out by another client: its key must be checked too
            None => false,
        };
        let sent = Instant::now();
        if !self.keep_alive(id).await? {
            self.pool.unassign(id, rev);
            return lost();
        }
        if !ours && !self.key_has_revision(&self.holder_key(lease), rev).await? {
            return lost();
        }
        self.pool.refreshed(id, rev, sent);
        Ok(lease.renewed(lease.ttl(), sent))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = lease.backend_data::<Held>() else {
            return Ok(false);
        };
        let (id, rev) = (held.lease_id, revision(lease));
        // Deleting our key wakes the next in line. The key carries this acquisition's
        // owner id, which nobody else ever writes, so a plain delete is owner-checked.
        // The lease goes back to the pool for the next acquisition.
        let key = self.holder_key(lease);
        let deleted = self
            .rpc("release", |mut c| {
                let key = key.clone();
                async move { c.delete(key, None).await }
            })
            .await?
            .deleted()
            > 0;
        match self.pool.unassign(id, rev) {
            Some(a) if deleted => {
                let idle = Idle {
                    id,
                    granted: a.granted,
                    refreshed: a.refreshed,
                };
                if let Some(extra) = self.pool.give_back(a.secs, idle) {
                    self.revoke_in_background(extra);
                }
            }
            // our key is gone (expired or deleted): the lease backs nothing any more
            Some(_) => self.revoke_in_background(id),
            // another client's lease: revoke it so that client's renewals fail now
            None if deleted => {
                let _ = self
                    .rpc("revoke", |mut c| async move { c.lease_revoke(id).await })
                    .await;
            }
            None => {}
        }
        Ok(deleted)
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockInfo>, LockError> {
        let dir = queue_dir(&self.opts.prefix, name);
        let Some(head) = self.first_in_queue(&dir).await? else {
            return Ok(None);
        };
        let lease_id = head.lease();
        let ttl = self
            .rpc("lease ttl", |mut c| async move {
                c.lease_time_to_live(lease_id, None).await
            })
            .await?
            .ttl();
        // whole seconds, rounded down: 0 means "under a second", -1 "expired"
        if ttl < 0 {
            return Ok(None);
        }
        Ok(Some(LockInfo {
            owner: OwnerId::from_stored(&owner_of(head.key())),
            token: token(head.create_revision())?,
            remaining: Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
        }))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, LeaseScope::PerLease, true)
    }

    fn backend_name(&self) -> &'static str {
        "etcd"
    }
}
