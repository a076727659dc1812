//! Renewals sent together: every renewal that reaches a node while the previous batch
//! is being taken off the queue goes out in one script call. Guards renew on a shared
//! grid (see `dlock_core::LockGuard`), so the renewals of all locks with one TTL come
//! due at the same instant and cost one round trip per tick, not one per lock.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use redis::aio::ConnectionManager;
use tokio::sync::{mpsc, oneshot};

use crate::node::from_redis;
use crate::scripts;

/// Keys per script call: a call blocks the server while it runs, so a huge batch is cut
/// into calls of this size, pipelined on the one connection.
const MAX_BATCH: usize = 256;

struct Request {
    key: Arc<str>,
    owner: Arc<str>,
    ttl_ms: u64,
    reply: oneshot::Sender<Result<bool, LockError>>,
}

/// The answer to one queued renewal.
pub(crate) type Pending = oneshot::Receiver<Result<bool, LockError>>;

/// The renewal queue of one node.
pub(crate) struct Renewals {
    queue: mpsc::UnboundedSender<Request>,
}

impl Renewals {
    /// Starts the batching task; it ends when this value is dropped.
    pub(crate) fn start(conn: ConnectionManager, timeout: Duration, shown: String) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(batch_loop(conn, rx, timeout, shown));
        Self { queue }
    }

    /// Queues a renewal of `key` to `ttl_ms` if `owner` still holds it: the answer is
    /// `Ok(false)` if not. Queuing is synchronous, so a caller renewing on several nodes
    /// queues on all of them before waiting for any.
    pub(crate) fn submit(
        &self,
        key: Arc<str>,
        owner: Arc<str>,
        ttl_ms: u64,
    ) -> Result<Pending, LockError> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            key,
            owner,
            ttl_ms,
            reply,
        };
        self.queue.send(request).map_err(|_| stopped())?;
        Ok(answer)
    }
}

/// Waits for a queued renewal's answer.
pub(crate) async fn answer(pending: Pending) -> Result<bool, LockError> {
    pending.await.map_err(|_| stopped())?
}

fn stopped() -> LockError {
    LockError::Unavailable {
        message: "the Redis renewal queue has stopped".into(),
        source: None,
    }
}

async fn batch_loop(
    conn: ConnectionManager,
    mut rx: mpsc::UnboundedReceiver<Request>,
    timeout: Duration,
    shown: String,
) {
    while let Some(first) = rx.recv().await {
        let batch = dlock_core::gather_batch(first, &mut rx, MAX_BATCH).await;
        // Not awaited here, so the next batch is pipelined behind this one.
        tokio::spawn(send(conn.clone(), batch, timeout, shown.clone()));
    }
}

async fn send(mut conn: ConnectionManager, batch: Vec<Request>, timeout: Duration, shown: String) {
    let mut call = scripts::RENEW_MANY.prepare_invoke();
    for r in &batch {
        call.key(&*r.key).arg(&*r.owner).arg(r.ttl_ms);
    }
    let answer: Result<Vec<i64>, LockError> =
        match tokio::time::timeout(timeout, call.invoke_async(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_redis(&format!("renew on {shown}"), e)),
            Err(_) => Err(LockError::Unavailable {
                message: format!("renew on {shown}: no answer within {timeout:?}"),
                source: None,
            }),
        };
    let answer = answer.and_then(|renewed| {
        if renewed.len() == batch.len() {
            Ok(renewed)
        } else {
            Err(LockError::Backend {
                message: format!(
                    "renew on {shown}: {} answers for {} locks",
                    renewed.len(),
                    batch.len()
                ),
                source: None,
            })
        }
    });
    match answer {
        Ok(renewed) => {
            for (r, n) in batch.into_iter().zip(renewed) {
                let _ = r.reply.send(Ok(n == 1));
            }
        }
        Err(e) => {
            for r in batch {
                let _ = r.reply.send(Err(e.for_another_caller()));
            }
        }
    }
}
