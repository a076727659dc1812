//! Renewals sent together: every renewal that reaches a node while the previous batch
//! is being taken off the queue goes out in one script call. Guards renew on a shared
//! grid (see `dlock_core::LockGuard`), so the renewals of all locks with one TTL come
//! due at the same instant and cost one round trip per tick, not one per lock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use dlock_core::LockError;
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
            if conn.is_cluster() {
                return Ok(per_slot(&conn, batch, timeout, &what).await);
            }
            let renewed = within(timeout, &what, async {
                renew_all(conn.clone(), &batch)
                    .await
                    .map_err(|e| from_redis(&what, e))
            })
            .await?;
            Ok(renewed.into_iter().map(Ok).collect())
        }
    })
}

/// One script call for `batch`: whether each renewal went through, in order. An
/// answer of another length is an error, not a "no".
async fn renew_all(mut conn: Conn, batch: &[Renewal]) -> redis::RedisResult<Vec<bool>> {
    let mut call = scripts::RENEW_MANY.prepare_invoke();
    for r in batch {
        call.key(&*r.key).arg(&*r.owner).arg(r.ttl_ms);
    }
    let renewed: Vec<i64> = call.invoke_async(&mut conn).await?;
    if renewed.len() != batch.len() {
        return Err(std::io::Error::other(format!(
            "{} answers to {} renewals",
            renewed.len(),
            batch.len()
        ))
        .into());
    }
    Ok(renewed.into_iter().map(|n| n == 1).collect())
}

/// On a cluster a script may touch one slot only: one call per slot, all at once
/// (each goes to its slot's master), each within `timeout`; every renewal gets its
/// own slot's answer or error, in the batch's order, so a master that is down or slow
/// fails only the renewals of its slots.
async fn per_slot(
    conn: &Conn,
    batch: Vec<Renewal>,
    timeout: Duration,
    what: &str,
) -> Vec<Result<bool, LockError>> {
    let size = batch.len();
    let mut slots: BTreeMap<u16, Vec<(usize, Renewal)>> = BTreeMap::new();
    for (i, r) in batch.into_iter().enumerate() {
        slots
            .entry(crate::cluster::slot(r.key.as_bytes()))
            .or_default()
            .push((i, r));
    }
    let mut calls = tokio::task::JoinSet::new();
    for (_, members) in slots {
        let (conn, what) = (conn.clone(), what.to_owned());
        calls.spawn(async move {
            let (places, renewals): (Vec<usize>, Vec<Renewal>) = members.into_iter().unzip();
            let answer = within(timeout, &what, async {
                renew_all(conn, &renewals)
                    .await
                    .map_err(|e| from_redis(&what, e))
            })
            .await;
            (places, answer)
        });
    }
    let mut out: Vec<Result<bool, LockError>> = (0..size)
        .map(|_| Err(LockError::transient(format!("{what}: no answer"))))
        .collect();
    while let Some(done) = calls.join_next().await {
        let Ok((places, answer)) = done else { continue };
        match answer {
            Ok(renewed) => {
                for (i, ok) in places.into_iter().zip(renewed) {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Ok(ok);
                    }
                }
            }
            Err(e) => {
                for i in places {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Err(LockError::transient(e.to_string()));
                    }
                }
            }
        }
    }
    out
}
