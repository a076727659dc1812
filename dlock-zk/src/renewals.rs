//! Renewals sent together: every renewal that reaches the client while the previous
//! batch is being taken off the queue is checked in one multi-read request (ZooKeeper
//! 3.6+), which proves the session alive and reads each lock node's owner. Guards renew
//! on a shared grid (see `dlock_core::LockGuard`), so holding many locks costs one
//! request per renewal tick, not one per lock.
//!
//! The multi-read goes right behind a `sync`, on the same session (requests of a
//! session are answered in order): the read is served only once the server we talk to
//! has caught up with the leader. A follower cut off from the leader keeps answering
//! plain reads from a copy that no longer moves — while the leader expires our session
//! and hands the lock on — but cannot complete a `sync`, so the renewal fails and the
//! guard gives the lease up by its `valid_until` (see `session::lease_ttl`).

use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::errors::from_zk;
use crate::session::Session;

/// Nodes per multi-read: bounds the size of one request and its reply.
const MAX_BATCH: usize = 512;

/// A renewal's outcome: the session timeout and the send time of the request that
/// proved the node still ours, or `None` when it is not (deleted, or another session's).
pub(crate) type Renewed = Option<(Duration, Instant)>;
// (the duration is the lease's TTL, `session::lease_ttl` of the session timeout)

struct Request {
    path: String,
    reply: oneshot::Sender<Result<Renewed, LockError>>,
}

/// The renewal queue of one client.
pub(crate) struct Renewals {
    queue: mpsc::UnboundedSender<Request>,
}

impl Renewals {
    /// Starts the batching task; it ends when this value is dropped.
    pub(crate) fn start(session: Arc<Session>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(batch_loop(session, rx));
        Self { queue }
    }

    /// Checks that the node at `path` still belongs to our live session.
    pub(crate) async fn renew(&self, path: &str) -> Result<Renewed, LockError> {
        let (reply, answer) = oneshot::channel();
        let gone = || LockError::Unavailable {
            message: "the ZooKeeper renewal queue has stopped".into(),
            source: None,
        };
        self.queue
            .send(Request {
                path: path.to_owned(),
                reply,
            })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn batch_loop(session: Arc<Session>, mut rx: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = rx.recv().await {
        let batch = dlock_core::gather_batch(first, &mut rx, MAX_BATCH).await;
        // Not awaited here, so the next batch is pipelined behind this one.
        tokio::spawn(send(Arc::clone(&session), batch));
    }
}

async fn send(session: Arc<Session>, batch: Vec<Request>) {
    let answers = check(&session, &batch).await;
    match answers {
        Ok(answers) => {
            for (r, a) in batch.into_iter().zip(answers) {
                let _ = r.reply.send(a);
            }
        }
        Err(e) => {
            for r in batch {
                let _ = r.reply.send(Err(e.for_another_caller()));
            }
        }
    }
}

/// One multi-read of every node in the batch; an answer per node, in order.
async fn check(
    session: &Session,
    batch: &[Request],
) -> Result<Vec<Result<Renewed, LockError>>, LockError> {
    let client = session.get().await?;
    let me = client.session_id().0;
    let timeout = crate::session::lease_ttl(client.session_timeout());
    let sent = Instant::now();
    let mut reader = client.new_multi_reader();
    for r in batch {
        reader
            .add_get_data(&r.path)
            .map_err(|e| from_zk("renew", e))?;
    }
    let limit = session.op_timeout();
    // both requests are sent here, in this order
    let synced = client.sync("/");
    let read = reader.commit();
    let both = async { tokio::join!(synced, read) };
    let results = match tokio::time::timeout(limit, both).await {
        Ok((Err(zk::Error::SessionExpired), _) | (_, Err(zk::Error::SessionExpired))) => {
            // the session is gone, and every ephemeral node with it
            return Ok(batch.iter().map(|_| Ok(None)).collect());
        }
        // a node deleted before the sync reached it: the read answers for it
        Ok((Ok(()) | Err(zk::Error::NoNode), Ok(results))) => results,
        Ok((Err(e), _)) => return Err(from_zk("renew (sync with the leader)", e)),
        Ok((_, Err(e))) => return Err(from_zk("renew", e)),
        Err(_) => {
            return Err(LockError::Unavailable {
                message: format!("renew: ZooKeeper did not answer within {limit:?}"),
                source: None,
            });
        }
    };
    if results.len() != batch.len() {
        return Err(LockError::Backend {
            message: format!(
                "renew: {} answers for {} lock nodes",
                results.len(),
                batch.len()
            ),
            source: None,
        });
    }
    Ok(results
        .into_iter()
        .map(|r| match r {
            zk::MultiReadResult::Data { stat, .. } if stat.ephemeral_owner == me => {
                Ok(Some((timeout, sent)))
            }
            zk::MultiReadResult::Data { .. }
            | zk::MultiReadResult::Error {
                err: zk::Error::NoNode,
            } => Ok(None),
            zk::MultiReadResult::Error { err } => Err(from_zk("renew", err)),
            _ => Err(LockError::Backend {
                message: "renew: an answer of another kind where node data was asked".into(),
                source: None,
            }),
        })
        .collect())
}
