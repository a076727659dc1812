//! Reading a lock's queue (its head, the key right before ours) and waiting for a
//! predecessor's key to go.

use etcd_client::{EventType, GetOptions, KeyValue, SortOrder, SortTarget};
use tokio::time::Instant;

use dlock_core::LockError;

use crate::EtcdLock;
use crate::queue::first_by_create;

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
