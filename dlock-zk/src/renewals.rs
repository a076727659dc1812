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
use dlock_core::backend::{Batcher, within};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::errors::from_zk;
use crate::session::Session;

/// Nodes per multi-read: bounds the size of one request and its reply.
const MAX_BATCH: usize = 512;

/// A renewal's outcome: the lease TTL and the send time of the request that proved the
/// node still ours (the TTL is `session::lease_ttl` of the session timeout), or `None`
/// when it is not (deleted, or another session's).
pub(crate) type Renewed = Option<(Duration, Instant)>;

/// The renewal queue of one session: a lock node's path in, whether it is still ours
/// out.
pub(crate) type Renewals = Batcher<String, Renewed>;

/// Starts the renewal queue of `session`.
pub(crate) fn start(session: Arc<Session>) -> Renewals {
    Batcher::start("renew", MAX_BATCH, move |paths: Vec<String>| {
        let session = Arc::clone(&session);
        async move { check(&session, &paths).await }
    })
}

/// One multi-read of every node in the batch; an answer per node, in order.
async fn check(
    session: &Session,
    batch: &[String],
) -> Result<Vec<Result<Renewed, LockError>>, LockError> {
    let client = session.get().await?;
    let me = client.session_id().0;
    let timeout = crate::session::lease_ttl(client.session_timeout());
    let sent = Instant::now();
    let mut reader = client.new_multi_reader();
    for path in batch {
        reader.add_get_data(path).map_err(|e| from_zk("renew", e))?;
    }
    let limit = session.op_timeout();
    // both requests are sent here, in this order
    let synced = client.sync("/");
    let read = reader.commit();
    let both = async { tokio::join!(synced, read) };
    let results = match within(limit, "renew", async { Ok(both.await) }).await? {
        (Err(zk::Error::SessionExpired), _) | (_, Err(zk::Error::SessionExpired)) => {
            // the session is gone, and every ephemeral node with it
            return Ok(batch.iter().map(|_| Ok(None)).collect());
        }
        // a node deleted before the sync reached it: the read answers for it
        (Ok(()) | Err(zk::Error::NoNode), Ok(results)) => results,
        (Err(e), _) => return Err(from_zk("renew (sync with the leader)", e)),
        (_, Err(e)) => return Err(from_zk("renew", e)),
    };
    Ok(results
        .into_iter()
        .map(|r| match r {
            // ours, unless an operator revoked it (its node then stays until we let go)
            zk::MultiReadResult::Data { stat, data }
                if stat.ephemeral_owner == me && data != crate::break_holder::REVOKED =>
            {
                Ok(Some((timeout, sent)))
            }
            zk::MultiReadResult::Data { .. }
            | zk::MultiReadResult::Error {
                err: zk::Error::NoNode,
            } => Ok(None),
            zk::MultiReadResult::Error { err } => Err(from_zk("renew", err)),
            _ => Err(LockError::backend_msg(
                "renew: an answer of another kind where node data was asked",
            )),
        })
        .collect())
}
