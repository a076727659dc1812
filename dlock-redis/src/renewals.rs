//! Renewals sent together: every renewal that reaches a node while the previous batch
//! is being taken off the queue goes out in one script call. Guards renew on a shared
//! grid (see `dlock_core::LockGuard`), so the renewals of all locks with one TTL come
//! due at the same instant and cost one round trip per tick, not one per lock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use dlock_core::backend::{Batcher, within};

use crate::errors::from_redis;
use crate::scripts;

/// Keys per script call: a call blocks the server while it runs, so a huge batch is cut
/// into calls of this size, pipelined on the one connection.
const MAX_BATCH: usize = 256;

/// One renewal: `key` to `ttl_ms` if `owner` still holds it (the answer is `false` if
/// not).
pub(crate) struct Renewal {
    pub key: Arc<str>,
    pub owner: Arc<str>,
    pub ttl_ms: u64,
}

/// The renewal queue of one node.
pub(crate) type Renewals = Batcher<Renewal, bool>;

/// Starts the renewal queue of the node behind `conn`.
pub(crate) fn start(conn: Conn, timeout: Duration, shown: String) -> Renewals {
    Batcher::start("renew", MAX_BATCH, move |batch: Vec<Renewal>| {
        let (conn, what) = (conn.clone(), format!("renew on {shown}"));
        async move {
            let renewed = within(timeout, &what, async {
                if conn.is_cluster() {
                    per_slot(&conn, &batch).await
                } else {
                    renew_all(conn.clone(), &batch.iter().collect::<Vec<_>>()).await
                }
                .map_err(|e| from_redis(&what, e))
            })
            .await?;
            Ok(renewed.into_iter().map(Ok).collect())
        }
    })
}

/// One script call for `batch`: whether each renewal went through, in order.
async fn renew_all(mut conn: Conn, batch: &[&Renewal]) -> redis::RedisResult<Vec<bool>> {
    let mut call = scripts::RENEW_MANY.prepare_invoke();
    for r in batch {
        call.key(&*r.key).arg(&*r.owner).arg(r.ttl_ms);
    }
    let renewed: Vec<i64> = call.invoke_async(&mut conn).await?;
    Ok(renewed.into_iter().map(|n| n == 1).collect())
}

/// On a cluster a script may touch one slot only: one call per slot, all at once
/// (each goes to its slot's master), the answers put back in the batch's order.
async fn per_slot(conn: &Conn, batch: &[Renewal]) -> redis::RedisResult<Vec<bool>> {
    let mut slots: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, r) in batch.iter().enumerate() {
        slots
            .entry(crate::cluster::slot(r.key.as_bytes()))
            .or_default()
            .push(i);
    }
    let mut calls = tokio::task::JoinSet::new();
    for (_, members) in slots {
        let renewals: Vec<(Arc<str>, Arc<str>, u64)> = members
            .iter()
            .map(|&i| {
                (
                    Arc::clone(&batch[i].key),
                    Arc::clone(&batch[i].owner),
                    batch[i].ttl_ms,
                )
            })
            .collect();
        let conn = conn.clone();
        calls.spawn(async move {
            let owned: Vec<Renewal> = renewals
                .into_iter()
                .map(|(key, owner, ttl_ms)| Renewal { key, owner, ttl_ms })
                .collect();
            let refs: Vec<&Renewal> = owned.iter().collect();
            (members, renew_all(conn, &refs).await)
        });
    }
    let mut out = vec![false; batch.len()];
    while let Some(done) = calls.join_next().await {
        let (members, renewed) = done.map_err(|e| {
            redis::RedisError::from(std::io::Error::other(format!("renew task: {e}")))
        })?;
        for (i, ok) in members.into_iter().zip(renewed?) {
            out[i] = ok;
        }
    }
    Ok(out)
}
