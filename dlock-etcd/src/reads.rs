//! Reading a lock's queue (its head, the key right before ours) and waiting for a
//! predecessor's key to go.

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget};
use tokio::time::Instant;

use dlock_core::LockError;

use crate::EtcdLock;
use crate::queue::first_by_create;
use crate::watches::Deletion;

impl EtcdLock {
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

    /// The keys queued before `my_rev` (up to [`AHEAD_READ`], the nearest first),
    /// whether that is all of them, and the revision of the read.
    pub(crate) async fn ahead(&self, dir: &str, my_rev: i64) -> Result<Ahead, LockError> {
        let dir = dir.to_owned();
        let resp = self
            .rpc("read predecessor", |mut c| {
                let dir = dir.clone();
                async move {
                    let opts = GetOptions::new()
                        .with_prefix()
                        .with_keys_only()
                        .with_max_create_revision(my_rev - 1)
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(AHEAD_READ);
                    c.get(dir, Some(opts)).await
                }
            })
            .await?;
        Ok(Ahead {
            read_at: resp.header().map_or(0, |h| h.revision()),
            complete: !resp.more(),
            keys: resp.kvs().iter().map(|kv| kv.key().to_vec()).collect(),
        })
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
        read_at: i64,
        every: std::time::Duration,
        mut keep_queued: F,
        until: Instant,
    ) -> Result<Option<Deletion>, LockError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), LockError>>,
    {
        // On the queue's shared watch, in place before we look again: a delete after
        // that look wakes us (see `watches` for why not a watch of our own).
        let key = String::from_utf8_lossy(pred);
        let deleted = match self.watches.on_delete(&key, self.opts.timeout).await {
            Ok(s) => s,
            Err(e) => {
                // the caller reads the queue again; pause so a dead watch is not a spin
                tracing::debug!(error = %e, "no queue watch; looking again shortly");
                tokio::time::sleep(WATCH_RETRY).await;
                return Ok(None);
            }
        };
        // Gone since we read it? The watch knows, if it covers that read; else ask.
        let gone = match deleted.deleted_after(pred, read_at) {
            Some(gone) => gone,
            None => self.created_at(pred).await?.is_none(),
        };
        if gone {
            return Ok(Some(deleted));
        }
        let mut next_refresh = Instant::now() + every;
        loop {
            tokio::select! {
                // deleted, or the watch broke: look again either way
                () = deleted.subscription.notified() => return Ok(Some(deleted)),
                () = tokio::time::sleep_until(next_refresh) => {
                    keep_queued().await?;
                    if self.created_at(pred).await?.is_none() {
                        return Ok(Some(deleted));
                    }
                    next_refresh = Instant::now() + every;
                }
                () = tokio::time::sleep_until(until) => return Ok(Some(deleted)),
            }
        }
    }
}

/// The pause before looking again when the queue's watch could not be created.
const WATCH_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// How many of the keys ahead of a waiter one read brings: when that is all of them,
/// the queue's watch alone tells when they are gone, and the waiter takes its turn
/// without reading the queue again.
const AHEAD_READ: i64 = 16;

/// The keys queued ahead of a waiter, as one read found them.
pub(crate) struct Ahead {
    /// The revision of the read.
    pub(crate) read_at: i64,
    /// Whether `keys` are all the keys ahead (none can join ahead later: a new key's
    /// create revision is above ours).
    pub(crate) complete: bool,
    /// The nearest first.
    pub(crate) keys: Vec<Vec<u8>>,
}

impl Ahead {
    /// Whether every key ahead is known deleted since the read (by the queue's watch).
    pub(crate) fn all_gone(&self, watched: &Deletion) -> bool {
        self.complete
            && self
                .keys
                .iter()
                .all(|k| watched.deleted_after(k, self.read_at) == Some(true))
    }
}
