//! A lock's queue in etcd: keys under the lock's directory ordered by create revision;
//! the first is the holder, each waiter watches only the key right before its own.

use dlock_core::{LockError, LockName};
use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse, TxnResponse,
};
use tokio::time::Instant;

use crate::EtcdLock;

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

    pub(crate) async fn first_in_queue(&self, dir: &str) -> Result<Option<KeyValue>, LockError> {
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
    pub(crate) async fn predecessor(
        &self,
        dir: &str,
        my_rev: i64,
    ) -> Result<Option<KeyValue>, LockError> {
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

    /// The create revision of `key`, if it exists.
    pub(crate) async fn created_at(&self, key: &[u8]) -> Result<Option<i64>, LockError> {
        let key = key.to_vec();
        let resp = self
            .rpc("read key", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(resp.kvs().first().map(KeyValue::create_revision))
    }

    /// Whether `key` exists and was created at `rev`.
    pub(crate) async fn key_has_revision(&self, key: &str, rev: i64) -> Result<bool, LockError> {
        Ok(self.created_at(key.as_bytes()).await? == Some(rev))
    }

    /// Waits until the predecessor's key is deleted, keeping our queued key alive
    /// meanwhile (`keep_queued` refreshes the shared lease and our key's deadline), or
    /// until `until`. At every refresh it also reads the
    /// predecessor again: a watch that went quiet (its member cut off, a stream that
    /// broke without telling) delays the hand-off by at most `every`.
    pub(crate) async fn wait_for_delete<F, Fut>(
        &self,
        pred: &[u8],
        every: std::time::Duration,
        mut keep_queued: F,
        until: Instant,
    ) -> Result<(), LockError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), LockError>>,
    {
        // Watch from now, then look again: a watch from a past revision is served by
        // etcd's catch-up loop, which runs only every 100 ms.
        let pred_key = pred.to_vec();
        let mut watch = self
            .rpc("watch", |mut c| {
                let k = pred_key.clone();
                async move { c.watch(k, None).await }
            })
            .await?;
        if self.created_at(pred).await?.is_none() {
            return Ok(());
        }
        let mut next_refresh = Instant::now() + every;
        loop {
            tokio::select! {
                msg = watch.message() => match msg {
                    Ok(Some(resp)) if !resp.canceled()
                        && !resp.events().iter().any(|e| e.event_type() == EventType::Delete) => {}
                    // deleted, cancelled, or the stream broke: look again either way
                    _ => return Ok(()),
                },
                () = tokio::time::sleep_until(next_refresh) => {
                    keep_queued().await?;
                    if self.created_at(pred).await?.is_none() {
                        return Ok(());
                    }
                    next_refresh = Instant::now() + every;
                }
                () = tokio::time::sleep_until(until) => return Ok(()),
            }
        }
    }
}
