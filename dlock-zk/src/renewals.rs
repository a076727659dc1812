//! Renewals sent together: every renewal that reaches the client while the previous
//! batch is being taken off the queue is checked behind one `sync`, which proves the
//! session alive, and each node is read to prove it still this session's. Guards renew
//! on a shared grid (see `dlock_core::LockGuard`), so holding many locks costs one
//! `sync` and one multi-read (ZooKeeper 3.6+) per renewal tick, not a request per lock.
//!
//! The reads go right behind the `sync`, on the same session (requests of a session
//! are answered in order): they are served only once the server we talk to has caught
//! up with the leader. A follower cut off from the leader keeps answering plain reads
//! from a copy that no longer moves — while the leader expires our session and hands
//! the lock on — but cannot complete a `sync`, so the renewal fails and the guard gives
//! the lease up by its `valid_until` (see `session::lease_ttl`).
//!
//! At scale the reads themselves are the cost: a session holding 100 000 locks had
//! the server read 100 000 nodes per tick, longer than a renewal may take. So a session
//! that renews more nodes than one multi-read reads ([`WATCH_FROM`], counted over a
//! lease TTL) reads each node once with a watch, and from then on a node whose watch is
//! still quiet when the `sync` is answered needs no read at all (`watches.rs` says why
//! that proves as much). Below that scale nothing is watched: one multi-read per tick
//! costs what the `sync` does, and a watch costs a request per lock to set.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::LockError;
use dlock_core::backend::{Batcher, Pending, within};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::errors::from_zk;
use crate::session::Session;
use crate::watches::Watches;

/// Renewals per batch: bounds the size of one multi-read and its reply.
const MAX_BATCH: usize = 512;

/// Held nodes from which a session watches them: more than one multi-read reads.
const WATCH_FROM: usize = MAX_BATCH;

/// A renewal's outcome: the lease TTL and the send time of the request that proved the
/// node still ours (the TTL is `session::lease_ttl` of the session timeout), or `None`
/// when it is not (deleted, or another session's).
pub(crate) type Renewed = Option<(Duration, Instant)>;

/// The renewal queue of one session: a lock node's path in, whether it is still ours
/// out.
pub(crate) struct Renewals {
    batcher: Batcher<String, Renewed>,
    watches: Arc<Watches>,
}

impl Renewals {
    /// Starts the renewal queue of `session`.
    pub(crate) fn start(session: Arc<Session>) -> Self {
        let watches = Arc::new(Watches::default());
        let kept = Arc::clone(&watches);
        let batcher = Batcher::start("renew", MAX_BATCH, move |paths: Vec<String>| {
            let (session, watches) = (Arc::clone(&session), Arc::clone(&kept));
            async move { check(&session, &watches, &paths).await }
        });
        Self { batcher, watches }
    }

    /// Queues the renewal of the node at `path`.
    pub(crate) fn submit(&self, path: String) -> Result<Pending<Renewed>, LockError> {
        self.batcher.submit(path)
    }

    /// Drops the watch on a released node, if it had one.
    pub(crate) fn forget(&self, path: &str) {
        self.watches.forget(path);
    }
}

/// One answer per node of the batch, in order.
type Answers = Vec<Result<Renewed, LockError>>;

/// Checks every node of the batch behind one `sync`: the nodes with a quiet watch by
/// the watch, the others by a read (which sets a watch when the session is at scale).
async fn check(
    session: &Session,
    watches: &Watches,
    batch: &[String],
) -> Result<Answers, LockError> {
    let client = session.get().await?;
    let me = client.session_id().0;
    let timeout = crate::session::lease_ttl(client.session_timeout());
    // a guard renews three times per lease TTL
    let watch = watches.at_scale(batch.len(), timeout, 3 * WATCH_FROM);
    let quiet = watches.quiet(me, batch.iter().map(String::as_str));
    let unread: Vec<&str> = paths_where(batch, &quiet, false);
    let limit = session.op_timeout();
    let sent = Instant::now();
    // the sync and the reads are sent here, in this order
    let synced = client.sync("/");
    let reads = Reads::send(&client, &unread, watch)?;
    let (synced, found) = within(limit, "renew", async {
        let synced = synced.await;
        Ok((synced, reads.found(me).await))
    })
    .await?;
    match synced {
        // the session is gone, and every ephemeral node with it
        Err(zk::Error::SessionExpired) => {
            batch.iter().for_each(|p| watches.forget(p));
            return Ok(batch.iter().map(|_| Ok(None)).collect());
        }
        // a node deleted before the sync reached it: the reads answer for it
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(e) => return Err(from_zk("renew (sync with the leader)", e)),
    }
    // a watch that fired since the first look (its event came in before the sync's
    // answer) leaves its node to be read again, now: behind the sync too
    let watched: Vec<&str> = paths_where(batch, &quiet, true);
    let still = watches.quiet(me, watched.iter().copied());
    let fired: Vec<&str> = paths_where(&watched, &still, false);
    let mut refound = if fired.is_empty() {
        Vec::new()
    } else {
        let reads = Reads::send(&client, &fired, watch)?;
        within(limit, "renew", reads.found(me)).await?
    }
    .into_iter();
    let (mut found, mut still) = (found?.into_iter(), still.into_iter());
    let mut out = Vec::with_capacity(batch.len());
    for (path, was_quiet) in batch.iter().zip(quiet) {
        let next = match (was_quiet, was_quiet && still.next() == Some(true)) {
            (true, true) => Some(Found::Ours(None)),
            (true, false) => refound.next(),
            (false, _) => found.next(),
        };
        out.push(match next {
            Some(Found::Ours(watcher)) => {
                if let Some(w) = watcher {
                    watches.arm(me, path, w);
                }
                Ok(Some((timeout, sent)))
            }
            Some(Found::Gone) => {
                watches.forget(path);
                Ok(None)
            }
            Some(Found::Error(e)) => Err(e),
            None => Err(LockError::backend_msg("renew: fewer answers than reads")),
        });
    }
    Ok(out)
}

/// The paths of `batch` whose flag is `flag`.
fn paths_where<'a>(batch: &'a [impl AsRef<str>], flags: &[bool], flag: bool) -> Vec<&'a str> {
    batch
        .iter()
        .zip(flags)
        .filter(|(_, f)| **f == flag)
        .map(|(p, _)| p.as_ref())
        .collect()
}

/// What a read found of one node.
enum Found {
    /// The node is this session's (with the watch the read set, if it set one).
    Ours(Option<zk::OneshotWatcher>),
    /// Deleted, or another session's.
    Gone,
    /// The read failed: this node's renewal fails, the guard tries again.
    Error(LockError),
}

type Boxed<'c, T> = Pin<Box<dyn Future<Output = Result<T, zk::Error>> + Send + 'c>>;

/// The reads of some nodes, sent: one multi-read, or one watched read per node.
enum Reads<'c> {
    Multi(Boxed<'c, Vec<zk::MultiReadResult>>),
    Watched(Vec<Boxed<'c, (Vec<u8>, zk::Stat, zk::OneshotWatcher)>>),
}

impl<'c> Reads<'c> {
    /// Sends the reads of `paths` (nothing when there are none).
    fn send(client: &'c zk::Client, paths: &[&str], watch: bool) -> Result<Self, LockError> {
        if watch {
            let reads = paths
                .iter()
                .map(|p| Box::pin(client.get_and_watch_data(p)) as Boxed<'c, _>)
                .collect();
            return Ok(Reads::Watched(reads));
        }
        let mut reader = client.new_multi_reader();
        for path in paths {
            reader.add_get_data(path).map_err(|e| from_zk("renew", e))?;
        }
        Ok(Reads::Multi(Box::pin(reader.commit())))
    }

    /// What each read found, in order; one error for all when the multi-read failed.
    async fn found(self, me: i64) -> Result<Vec<Found>, LockError> {
        let ours = |stat: &zk::Stat| stat.ephemeral_owner == me;
        match self {
            Reads::Multi(read) => match read.await {
                Ok(results) => Ok(results
                    .into_iter()
                    .map(|r| match r {
                        zk::MultiReadResult::Data { stat, .. } if ours(&stat) => Found::Ours(None),
                        zk::MultiReadResult::Data { .. }
                        | zk::MultiReadResult::Error {
                            err: zk::Error::NoNode,
                        } => Found::Gone,
                        zk::MultiReadResult::Error { err } => Found::Error(from_zk("renew", err)),
                        _ => Found::Error(LockError::backend_msg(
                            "renew: an answer of another kind where node data was asked",
                        )),
                    })
                    .collect()),
                // (an ended session is the sync's to report, ahead of this)
                Err(e) => Err(from_zk("renew", e)),
            },
            Reads::Watched(reads) => {
                let mut found = Vec::with_capacity(reads.len());
                // every read was sent already: their answers come in this order
                for read in reads {
                    found.push(match read.await {
                        Ok((_, stat, watcher)) if ours(&stat) => Found::Ours(Some(watcher)),
                        Ok(_) | Err(zk::Error::NoNode | zk::Error::SessionExpired) => Found::Gone,
                        Err(e) => Found::Error(from_zk("renew", e)),
                    });
                }
                Ok(found)
            }
        }
    }
}
