//! A lock's queue in etcd: keys under the lock's directory ordered by create revision;
//! the first is the holder, each waiter watches only the key right before its own.

use std::time::Duration;

use dlock_core::{Access, LockError, LockName, OwnerId, drift_margin};
use etcd_client::{
    Compare, CompareOp, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, TxnResponse,
};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::dir_for;
use crate::session::bookkeeping::Lookup;
use crate::session::leases::SharedLease;

/// The head of a queue.
pub(crate) fn first_by_create() -> GetOptions {
    GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1)
}

/// The results of a txn's range reads, in order.
pub(crate) fn gets(resp: &TxnResponse) -> Vec<Vec<KeyValue>> {
    resp.op_responses()
        .into_iter()
        .filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g.kvs().to_vec()),
            _ => None,
        })
        .collect()
}

/// Where an enqueue left us.
pub(crate) struct Enqueued {
    /// Our key's create revision.
    pub revision: i64,
    /// The create revision of the head of the queue, when known.
    pub head: Option<i64>,
}

impl EtcdLock {
    /// One txn that creates `key` only if nobody holds or waits for the lock (waiters
    /// keep their place in line), and otherwise reads our key (a put may have landed
    /// before a lost reply) and the head of the queue. Also says whether the answer
    /// came from the first attempt.
    pub(crate) async fn take_if_free(
        &self,
        dir: &str,
        key: &str,
        lease: i64,
    ) -> Result<(TxnResponse, bool), LockError> {
        self.rpc_attempts("take if free", |mut c| {
            let (dir, key) = (dir.to_owned(), key.to_owned());
            async move {
                let txn = Txn::new()
                    .when([Compare::version(dir.clone(), CompareOp::Equal, 0).with_prefix()])
                    .and_then([TxnOp::put(
                        key.clone(),
                        "",
                        Some(PutOptions::new().with_lease(lease)),
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

    /// One txn: a free lock is taken as `take_if_free` takes it (no read needed); a busy
    /// one is queued by a nested txn that also reads the head of the queue. Retried
    /// after a lost reply, it finds our key instead.
    pub(crate) async fn join_queue(
        &self,
        name: &LockName,
        dir: &str,
        key: &str,
        lease: i64,
    ) -> Result<Enqueued, LockError> {
        let resp = self
            .rpc("enqueue", |mut c| {
                let (dir, key) = (dir.to_owned(), key.to_owned());
                async move {
                    let put =
                        || TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(lease)));
                    let queue = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([put(), TxnOp::get(dir.clone(), Some(first_by_create()))])
                        .or_else([
                            TxnOp::get(key.clone(), None),
                            TxnOp::get(dir.clone(), Some(first_by_create())),
                        ]);
                    let txn = Txn::new()
                        .when([Compare::version(dir, CompareOp::Equal, 0).with_prefix()])
                        .and_then([put()])
                        .or_else([TxnOp::txn(queue)]);
                    c.txn(txn).await
                }
            })
            .await?;
        let revision = resp.header().map_or(0, |h| h.revision());
        if resp.succeeded() {
            return Ok(Enqueued {
                revision,
                head: Some(revision),
            });
        }
        let (queued, g) = match resp.op_responses().into_iter().next() {
            Some(TxnOpResponse::Txn(inner)) => (inner.succeeded(), gets(&inner)),
            _ => (false, Vec::new()),
        };
        let head = g
            .last()
            .and_then(|kvs| kvs.first())
            .map(KeyValue::create_revision);
        let revision = if queued {
            revision
        } else {
            g.first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision)
                .ok_or_else(|| {
                    LockError::transient(format!("the queued request for {name} vanished"))
                })?
        };
        Ok(Enqueued { revision, head })
    }
}

/// A key that may exist and is not handed to the caller yet: if the acquisition fails,
/// times out or is dropped, the key is deleted now (which wakes the next waiter), and
/// once more by the sweeper after the operation timeout, in case a create retried after
/// a lost reply lands late.
pub(crate) struct PendingKey {
    lock: EtcdLock,
    lease: i64,
    key: String,
    armed: bool,
}

impl PendingKey {
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// The create was answered and did not happen: nothing to clean up.
    pub(crate) fn never_created(mut self) {
        self.armed = false;
        self.lock.leases.forget(self.lease, &self.key);
    }
}

impl Drop for PendingKey {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let late = Instant::now() + self.lock.opts.timeout;
        self.lock.leases.abandon(self.lease, &self.key, late);
        let (lock, key) = (self.lock.clone(), self.key.clone());
        // counted, so a process that exits right after waits for the delete
        dlock_core::spawn_cleanup(async move {
            let _ = lock
                .rpc("delete abandoned key", |mut c| {
                    let key = key.clone();
                    async move { c.delete(key, None).await }
                })
                .await;
        });
    }
}

impl EtcdLock {
    /// A new acquisition's key on the shared lease, noted before it is sent.
    pub(crate) async fn prepare(
        &self,
        name: &LockName,
        access: Access,
        owner: &OwnerId,
        ttl: Duration,
    ) -> Result<(String, String, SharedLease, PendingKey), LockError> {
        let dir = dir_for(&self.opts.prefix, name, access);
        let key = format!("{dir}{owner}");
        let ticket = self.lease_for(ttl).await?;
        self.leases
            .expect(ticket.id, &key, Instant::now() + ticket.granted);
        let pending = PendingKey {
            lock: self.clone(),
            lease: ticket.id,
            key: key.clone(),
            armed: true,
        };
        Ok((dir, key, ticket, pending))
    }

    /// Whether `key` is certainly still on the server: not swept or deleted as far as
    /// the client knows, on a lease whose last refresh is recent enough that the server
    /// cannot have expired it.
    pub(crate) fn surely_alive(&self, id: i64, key: &str, rev: i64) -> bool {
        match self.leases.lookup(id, key, rev) {
            Lookup::Held {
                granted, refreshed, ..
            } => Instant::now() < refreshed + granted - drift_margin(granted),
            _ => false,
        }
    }

    /// Refreshes the shared lease and moves our key's deadline a TTL ahead; fails if
    /// the key is no longer ours.
    pub(crate) async fn keep_key(
        &self,
        id: i64,
        key: &str,
        rev: i64,
        granted: Duration,
    ) -> Result<(), LockError> {
        let Lookup::Held { gate, .. } = self.leases.lookup(id, key, rev) else {
            return Err(LockError::transient(
                "the queued request expired while waiting",
            ));
        };
        self.refresh_shared(id, &gate).await?;
        if self.leases.extend(id, key, rev, Instant::now() + granted) {
            Ok(())
        } else {
            Err(LockError::transient(
                "the queued request expired while waiting",
            ))
        }
    }
}

/// One acquisition's key in a lock's queue; dropped before its grant, the key is
/// deleted (see `PendingKey`).
pub struct EtcdEntry {
    pub(crate) name: LockName,
    pub(crate) access: Access,
    pub(crate) owner: OwnerId,
    pub(crate) dir: String,
    pub(crate) key: String,
    pub(crate) ticket: SharedLease,
    /// The key's create revision: its place in line, and its fencing token.
    pub(crate) rev: i64,
    pub(crate) pending: Option<PendingKey>,
}

impl std::fmt::Debug for EtcdEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdEntry")
            .field("key", &self.key)
            .field("rev", &self.rev)
            .finish_non_exhaustive()
    }
}
