//! Semaphores and read-write locks on etcd: the mutex's queue of keys ordered by create
//! revision, in a directory of their own (see `keys::dir_for`), each key's value its
//! access tag (`p<N>`, `r`, `w`). Core's queue rule decides from the keys ahead, and a
//! waiter watches only the keys that rule names.

use std::collections::HashSet;
use std::time::Duration;

use dlock_core::backend::{Standing, holds, standing};
use dlock_core::{Access, FencingToken, Holding, LockError, LockName, OwnerId};
use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, WatchOptions,
};
use tokio::time::Instant;

use crate::EtcdLock;
use crate::keys::{dir_for, owner_of};
use crate::queue::gets;

/// Every key of a queue, oldest first (optionally only those created before `before`).
fn in_order(before: Option<i64>) -> GetOptions {
    let opts = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend);
    match before {
        Some(rev) => opts.with_max_create_revision(rev - 1),
        None => opts,
    }
}

/// The accesses of queued keys, from their values.
fn accesses(name: &LockName, kvs: &[KeyValue]) -> Result<Vec<Access>, LockError> {
    kvs.iter()
        .map(|kv| {
            std::str::from_utf8(kv.value())
                .ok()
                .and_then(Access::from_tag)
                .ok_or_else(|| {
                    LockError::backend_msg(format!(
                        "a key in the queue of {name} is not dlock's: {}",
                        String::from_utf8_lossy(kv.key())
                    ))
                })
        })
        .collect()
}

/// Where an entry of `access` stands behind `ahead`, and the keys it must watch.
pub(crate) fn stand(
    name: &LockName,
    access: Access,
    ahead: &[KeyValue],
) -> Result<(Standing, Vec<Vec<u8>>), LockError> {
    let here = standing(name, access, &accesses(name, ahead)?)?;
    let watch = match &here {
        Standing::Holds => Vec::new(),
        Standing::Waits(range) => ahead[range.clone()]
            .iter()
            .map(|kv| kv.key().to_vec())
            .collect(),
    };
    Ok((here, watch))
}

impl EtcdLock {
    /// One txn: creates `key` (valued with its access tag) unless an earlier attempt
    /// did, and lists the queue. Our key's create revision and the keys ahead of it.
    pub(crate) async fn join_shared(
        &self,
        name: &LockName,
        dir: &str,
        key: &str,
        access: Access,
        lease: i64,
    ) -> Result<(i64, Vec<KeyValue>), LockError> {
        let resp = self
            .rpc("enqueue", |mut c| {
                let (dir, key, tag) = (dir.to_owned(), key.to_owned(), access.tag());
                async move {
                    let put =
                        TxnOp::put(key.clone(), tag, Some(PutOptions::new().with_lease(lease)));
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([put, TxnOp::get(dir.clone(), Some(in_order(None)))])
                        .or_else([TxnOp::get(key, None), TxnOp::get(dir, Some(in_order(None)))]);
                    c.txn(txn).await
                }
            })
            .await?;
        let g = gets(&resp);
        let rev = if resp.succeeded() {
            resp.header().map_or(0, |h| h.revision())
        } else {
            g.first()
                .and_then(|kvs| kvs.first())
                .map(KeyValue::create_revision)
                .ok_or_else(|| {
                    LockError::transient(format!("the queued request for {name} vanished"))
                })?
        };
        let ahead = g
            .last()
            .map(|kvs| {
                kvs.iter()
                    .filter(|kv| kv.create_revision() < rev)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Ok((rev, ahead))
    }

    /// The keys queued before `rev`, oldest first.
    pub(crate) async fn ahead_of(&self, dir: &str, rev: i64) -> Result<Vec<KeyValue>, LockError> {
        let dir = dir.to_owned();
        let resp = self
            .rpc("read queue", |mut c| {
                let dir = dir.clone();
                async move { c.get(dir, Some(in_order(Some(rev)))).await }
            })
            .await?;
        Ok(resp.kvs().to_vec())
    }

    /// Deletes a key we queued and were refused with: nothing of a `try` stays behind.
    pub(crate) async fn withdraw(&self, key: &str) -> Result<(), LockError> {
        let key = key.to_owned();
        self.rpc("withdraw", |mut c| {
            let key = key.clone();
            async move { c.delete(key, None).await }
        })
        .await
        .map(|_| ())
    }

    /// Waits until one of `keys` (queued before `rev` in `dir`) is deleted, keeping our
    /// key alive meanwhile (`keep_queued`), or until `until`. One watch on the queue,
    /// opened from now and followed by a fresh look; at every refresh it looks again, so
    /// a watch that went quiet delays a hand-off by at most `every`.
    pub(crate) async fn wait_for_any_delete<F, Fut>(
        &self,
        dir: &str,
        rev: i64,
        keys: Vec<Vec<u8>>,
        every: Duration,
        mut keep_queued: F,
        until: Instant,
    ) -> Result<(), LockError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), LockError>>,
    {
        let watched: HashSet<Vec<u8>> = keys.into_iter().collect();
        let mut watch = self
            .rpc("watch", |mut c| {
                let d = dir.to_owned();
                async move { c.watch(d, Some(WatchOptions::new().with_prefix())).await }
            })
            .await?;
        let gone = |ahead: &[KeyValue]| {
            let present: HashSet<&[u8]> = ahead.iter().map(KeyValue::key).collect();
            watched.iter().any(|k| !present.contains(k.as_slice()))
        };
        if gone(&self.ahead_of(dir, rev).await?) {
            return Ok(());
        }
        let mut next_refresh = Instant::now() + every;
        loop {
            tokio::select! {
                msg = watch.message() => match msg {
                    Ok(Some(resp)) if !resp.canceled() => {
                        if resp.events().iter().any(|e| {
                            e.event_type() == EventType::Delete
                                && e.kv().is_some_and(|kv| watched.contains(kv.key()))
                        }) {
                            return Ok(());
                        }
                    }
                    // cancelled, or the stream broke: look again
                    _ => return Ok(()),
                },
                () = tokio::time::sleep_until(next_refresh) => {
                    keep_queued().await?;
                    if gone(&self.ahead_of(dir, rev).await?) {
                        return Ok(());
                    }
                    next_refresh = Instant::now() + every;
                }
                () = tokio::time::sleep_until(until) => return Ok(()),
            }
        }
    }

    /// The holders of `name`'s semaphore or read-write lock: the keys the queue rule
    /// lets hold, with their leases' time left.
    pub(crate) async fn shared_holders(
        &self,
        name: &LockName,
        of: Access,
    ) -> Result<Vec<Holding>, LockError> {
        let dir = dir_for(&self.opts.prefix, name, of);
        let resp = self
            .rpc("read queue", |mut c| {
                let dir = dir.clone();
                async move { c.get(dir, Some(in_order(None))).await }
            })
            .await?;
        let kvs = resp.kvs();
        let all = accesses(name, kvs)?;
        let mut out = Vec::new();
        for (i, kv) in kvs.iter().enumerate() {
            if !holds(name, all[i], &all[..i])? {
                continue;
            }
            let lease_id = kv.lease();
            let ttl = self
                .rpc("lease ttl", |mut c| async move {
                    c.lease_time_to_live(lease_id, None).await
                })
                .await?
                .ttl();
            if ttl < 0 {
                continue;
            }
            out.push(Holding::new(
                all[i],
                OwnerId::from_stored(&owner_of(kv.key())),
                FencingToken::from_signed(kv.create_revision(), "create revision")?,
                Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
            ));
        }
        Ok(out)
    }

    /// Every holder of a semaphore or read-write lock whose name starts with `prefix`:
    /// the names from one keys-only range per primitive, each one's holders as
    /// [`Self::shared_holders`] reads them.
    pub(crate) async fn listed_shared(
        &self,
        prefix: &str,
    ) -> Result<Vec<dlock_core::Held>, LockError> {
        let mut held = Vec::new();
        for (space, access) in [("%sem/", Access::Permit(1)), ("%rw/", Access::Read)] {
            let root = format!("{}{space}", self.opts.prefix);
            let resp = self
                .keys_from(crate::keys::escaped_prefix(root.clone(), prefix))
                .await?;
            let names: std::collections::BTreeSet<String> = resp
                .kvs()
                .iter()
                .filter_map(|kv| crate::keys::name_of(&root, kv.key()))
                .collect();
            for name in names {
                let Ok(name) = LockName::new(&name) else {
                    continue;
                };
                for holding in self.shared_holders(&name, access).await? {
                    held.push(dlock_core::Held::shared(name.clone(), holding));
                }
            }
        }
        Ok(held)
    }

    /// The keys (no values) starting with `from`, in one range read.
    pub(crate) async fn keys_from(
        &self,
        from: String,
    ) -> Result<etcd_client::GetResponse, LockError> {
        self.rpc("list", |mut c| {
            let from = from.clone();
            async move {
                let opts = etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_keys_only();
                c.get(from, Some(opts)).await
            }
        })
        .await
    }
}
