//! A ticket's lock node (`tickets.rs`): a persistent node with a TTL holding the
//! lease's place in the queue, kept alive by children with the same TTL.
//!
//! ZooKeeper deletes a TTL node once the leader's wall clock says it went unmodified
//! for its TTL — but only a node without children: its container manager picks such
//! nodes from the tree as applied, and the delete it sends later (rate-limited, after
//! every other candidate of that pass) does not look at the node's age again, but is
//! refused if the node has a child by then (the server counts children against every
//! write ordered before it). So a renewal writes nothing into the node: it creates a
//! child with the ticket's TTL, in one transaction with a check that the node is still
//! the one taken up. Once that child exists, no delete of the node — decided a moment
//! ago or a minute ago — can take it, and a delete decided late for an older child
//! only takes that child. Nothing is measured between two writes, so a renewal that
//! follows a late one, a retried renewal whose first reply was lost, or two processes
//! renewing one ticket leave no decided delete behind a trusted renewal.
//!
//! What a renewal trusts is the newest child's own TTL, judged by whichever server
//! leads by then against the stamp of the leader that created the child: the child
//! cannot be deleted before it was created (no earlier than the request was sent) plus
//! the TTL, less how far the two leaders' wall clocks may be apart — at most a tenth
//! of the TTL, the bound docs/safety.md states ([`server_clock_bound`]) — and the
//! node not before its last child. The lease ends that bound and the drift margin
//! before the TTL ([`ticket_valid_until`]).

use std::time::Duration;

use dlock_core::{FencingToken, Lease, LockError, drift_margin};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;

/// What a ticket node's data starts with; its TTL in milliseconds and the token of the
/// lease it carries follow. ZooKeeper shows clients a TTL node as a plain persistent
/// one (its `ephemeralOwner` reads 0), so the data is how `resume` and renewals know
/// the node; and the node's own creation zxid is the hand-over's — above those of the
/// waiters queued behind it — so the lease keeps the token it was granted with,
/// written here, and a waiter granted after it still gets a higher one.
const HANDED_OVER: &str = "dlock:handed-over";

/// The name prefix of a ticket node's children (sequential: each renewal adds one).
pub(crate) const RENEWAL: &str = "renewal-";

/// A ticket node as its data describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HandedOver {
    /// Whole milliseconds, as the server keeps a TTL.
    pub(crate) ttl: Duration,
    pub(crate) token: FencingToken,
}

impl HandedOver {
    pub(crate) fn data(self) -> Vec<u8> {
        format!(
            "{HANDED_OVER} ttl_ms={} token={}",
            self.ttl.as_millis(),
            self.token
        )
        .into_bytes()
    }

    /// The node of `data` and `stat`, if it was handed over (never an ephemeral node).
    pub(crate) fn read(data: &[u8], stat: &zk::Stat) -> Option<Self> {
        let text = std::str::from_utf8(data).ok()?.strip_prefix(HANDED_OVER)?;
        let (ttl, token) = text.strip_prefix(" ttl_ms=")?.split_once(" token=")?;
        let ttl = Duration::from_millis(ttl.parse().ok().filter(|ms| *ms > 0)?);
        let token = FencingToken::new(token.parse().ok()?);
        (stat.ephemeral_owner == 0).then_some(Self { ttl, token })
    }
}

/// `d` cut to whole milliseconds (at least one: a TTL node's TTL cannot be zero).
pub(crate) fn whole_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
}

/// How far apart the ZooKeeper servers' wall clocks may be, for a ticket of `ttl`: a
/// tenth of it (docs/safety.md). A node's age is its stamp (one leader's clock) against
/// the clock of whichever server leads when the container manager looks.
#[must_use]
pub fn server_clock_bound(ttl: Duration) -> Duration {
    ttl / 10
}

/// How long after it was sent a renewal of a ticket of `ttl` is trusted: its child
/// cannot be deleted before `sent + ttl − server_clock_bound(ttl)` by any leader's
/// clock within the bound, and the lease ends the drift margin before that.
#[must_use]
pub fn ticket_trusted_for(ttl: Duration) -> Duration {
    ttl.saturating_sub(server_clock_bound(ttl))
        .saturating_sub(drift_margin(ttl))
}

/// Until when a renewal of a ticket of `ttl` sent at `sent` is trusted
/// ([`ticket_trusted_for`]).
#[must_use]
pub fn ticket_valid_until(sent: Instant, ttl: Duration) -> Instant {
    sent + ticket_trusted_for(ttl)
}

/// The fencing token of the lease a lock node stands for: its creation zxid, or the
/// one written in a ticket's node.
pub(crate) fn token_of(data: &[u8], stat: &zk::Stat) -> Result<FencingToken, LockError> {
    match HandedOver::read(data, stat) {
        Some(h) => Ok(h.token),
        None => FencingToken::from_signed(stat.czxid, "czxid"),
    }
}

/// The error for servers without TTL nodes.
pub(crate) fn no_ttl_nodes() -> LockError {
    LockError::Unsupported {
        backend: "zookeeper",
        what: "tickets on these servers: a ticket's lock lives in a TTL node, which needs \
               zookeeper.extendedTypesEnabled=true (a JVM flag or zoo.cfg line on every server)"
            .into(),
    }
}

/// The sequence number of a renewal child (`renewal-0000000007`).
fn renewal_sequence(child: &str) -> Option<i64> {
    child.strip_prefix(RENEWAL)?.parse().ok()
}

impl ZkLock {
    /// A renewal of a ticket's node: a child with the lease's TTL, created only while
    /// the node is the one taken up, at the version taken up.
    pub(crate) async fn renew_handed_over(&self, lease: &Lease) -> Result<Lease, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        let Some(node) = held.ticket else {
            return Err(LockError::lease_lost(lease.name()));
        };
        let lost = || LockError::lease_lost(lease.name());
        let ttl = node.ttl;
        if whole_millis(lease.ttl()) != ttl {
            return Err(LockError::InvalidArgument(format!(
                "a ZooKeeper ticket keeps the TTL it was handed over with ({} ms); this \
                 renewal asks for {} ms",
                ttl.as_millis(),
                lease.ttl().as_millis()
            )));
        }
        let client = held.slot.session.get().await?;
        let child = zk::CreateMode::PersistentSequential
            .with_acls(self.acls())
            .with_ttl(ttl);
        let mut renewal = client.new_multi_writer();
        renewal
            .add_check_version(&held.path, node.version)
            .and_then(|()| renewal.add_create(&format!("{}/{RENEWAL}", held.path), b"", &child))
            .map_err(|e| LockError::InvalidArgument(format!("a ticket's renewal: {e}")))?;
        let sent = Instant::now();
        let committed = self.op("renew", async { Ok(renewal.commit().await) }).await;
        match committed {
            Ok(Ok(results)) => {
                let made = results.into_iter().find_map(|r| match r {
                    zk::MultiWriteResult::Create { path, .. } => Some(path),
                    _ => None,
                });
                if let Some(made) = made {
                    self.prune_renewals(&client, &held.path, &made);
                }
                Ok(lease
                    .renewed(ttl, sent)
                    .narrowed(ticket_valid_until(sent, ttl)))
            }
            // the node went (released, broken, expired) or was written (a break): the
            // multi applied nothing
            Ok(Err(zk::MultiWriteError::OperationFailed {
                source: zk::Error::BadVersion | zk::Error::NoNode,
                ..
            })) => Err(lost()),
            Ok(Err(zk::MultiWriteError::OperationFailed {
                source: zk::Error::Unimplemented,
                ..
            })) => Err(no_ttl_nodes()),
            Ok(Err(zk::MultiWriteError::OperationFailed { source, .. })) => {
                Err(from_zk("renew", source))
            }
            // no answer: a child that lands later only keeps the node longer
            Ok(Err(zk::MultiWriteError::RequestFailed { source })) => Err(from_zk("renew", source)),
            Err(e) => Err(e),
        }
    }

    /// Deletes, in the background, the renewals of the node at `path` older than
    /// `newest` (whose TTLs end first): the node lives as long as its newest child, and
    /// never keeps more than a few.
    fn prune_renewals(&self, client: &zk::Client, path: &str, newest: &str) {
        let Some(newest) = newest.rsplit('/').next().and_then(renewal_sequence) else {
            return;
        };
        let (lock, client, path) = (self.clone(), client.clone(), path.to_owned());
        tokio::spawn(async move {
            let Ok(Ok(children)) = lock
                .op("list renewals", async {
                    Ok(client.list_children(&path).await)
                })
                .await
            else {
                return;
            };
            for child in children {
                if renewal_sequence(&child).is_some_and(|s| s < newest) {
                    let delete = client.delete(&format!("{path}/{child}"), None);
                    let _ = lock.op("delete renewal", async { Ok(delete.await) }).await;
                }
            }
        });
    }

    /// Deletes the ticket node at `path` if it is still the node created at `czxid`,
    /// with every child, in one transaction: `true` once this call deleted it, `false`
    /// when it was gone or is another node. A renewal that adds a child in between
    /// only makes it look again.
    pub(crate) async fn delete_ticket_node(
        &self,
        client: &zk::Client,
        path: &str,
        czxid: Option<i64>,
    ) -> Result<bool, LockError> {
        for _ in 0..5 {
            let listed = client.get_children(path);
            let (children, stat) = match self.op("read node", async { Ok(listed.await) }).await? {
                Ok(read) => read,
                Err(zk::Error::NoNode) => return Ok(false),
                Err(e) => return Err(from_zk("read node", e)),
            };
            if czxid.is_some_and(|c| c != stat.czxid) {
                return Ok(false);
            }
            let mut delete = client.new_multi_writer();
            for child in &children {
                delete
                    .add_delete(&format!("{path}/{child}"), None)
                    .map_err(|e| from_zk("delete node", e))?;
            }
            delete
                .add_delete(path, Some(stat.version))
                .map_err(|e| from_zk("delete node", e))?;
            match self
                .op("delete node", async { Ok(delete.commit().await) })
                .await?
            {
                Ok(_) => return Ok(true),
                // a child expired, a renewal added one, a break wrote the node: again
                Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::NoNode | zk::Error::NotEmpty | zk::Error::BadVersion,
                    ..
                }) => {}
                Err(zk::MultiWriteError::OperationFailed { source, .. }) => {
                    return Err(from_zk("delete node", source));
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    return Err(from_zk("delete node", source));
                }
            }
        }
        Err(LockError::transient(format!(
            "deleting {path}: its children kept changing"
        )))
    }

    /// Refuses with [`no_ttl_nodes`] when the servers have no TTL nodes: a TTL node
    /// created and deleted under the root in one transaction (nothing stays).
    pub(crate) async fn check_ttl_nodes(&self, client: &zk::Client) -> Result<(), LockError> {
        let path = format!("{}/ttl-check-{:016x}", self.root, dlock_core::random_u64());
        let mode = zk::CreateMode::Persistent
            .with_acls(self.acls())
            .with_ttl(Duration::from_secs(1));
        for _ in 0..2 {
            let mut probe = client.new_multi_writer();
            probe
                .add_create(&path, b"", &mode)
                .and_then(|()| probe.add_delete(&path, None))
                .map_err(|e| LockError::InvalidArgument(format!("a TTL node: {e}")))?;
            let committed = self
                .op("check TTL nodes", async { Ok(probe.commit().await) })
                .await?;
            match committed.map_err(zk::Error::from) {
                Err(zk::Error::Unimplemented) => return Err(no_ttl_nodes()),
                Err(zk::Error::NoNode) => {
                    // no root yet: made as an acquisition makes it
                    let mode = zk::CreateMode::Persistent.with_acls(self.acls());
                    match client.mkdir(&self.root, &mode).await {
                        Ok(()) | Err(zk::Error::NodeExists) => {}
                        Err(e) => return Err(from_zk("create root node", e)),
                    }
                }
                // anything else says nothing of TTL nodes
                _ => return Ok(()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_reads_back_and_only_off_sessions() {
        let node = HandedOver {
            ttl: Duration::from_millis(1200),
            token: FencingToken::new(77),
        };
        let stat = zk::Stat {
            czxid: 5,
            mzxid: 5,
            pzxid: 5,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        assert_eq!(HandedOver::read(&node.data(), &stat), Some(node));
        let ephemeral = zk::Stat {
            ephemeral_owner: 42,
            ..stat
        };
        assert_eq!(HandedOver::read(&node.data(), &ephemeral), None);
        assert_eq!(HandedOver::read(b"10.0.0.1", &stat), None);
    }

    #[test]
    fn a_ticket_ends_the_clock_bound_and_the_drift_before_its_ttl() {
        let sent = Instant::now();
        let ttl = Duration::from_secs(300);
        // 270 s (a tenth for the servers' clocks) less the drift margin (3.002 s)
        assert_eq!(
            ticket_valid_until(sent, ttl) - sent,
            Duration::from_millis(266_998)
        );
        assert_eq!(renewal_sequence("renewal-0000000012"), Some(12));
        assert_eq!(renewal_sequence("lock-x-0000000012"), None);
    }
}
