//! A handed-over lock node (`tickets.rs`): a persistent node with a TTL, what its data
//! says, and renewing it.
//!
//! The server deletes a TTL node once the leader's wall clock says the node went
//! unmodified for the TTL: its container manager looks every
//! `znode.container.checkIntervalMs` (60 s by default) at the nodes as applied, and the
//! delete it then submits does not look at the node's modification time again. So a
//! renewal reads the node, writes it back with the version read, and trusts the write
//! only if the leader's stamps leave room for it: the gap between the old and the new
//! modification time, plus the write's round trip (which bounds how long the write sat
//! between its stamp and its application, while the manager still saw the old stamp),
//! plus a tenth of the TTL for the servers' clocks, at most the TTL. Otherwise a delete
//! may already be decided: the lease is lost, and the node is deleted at once rather
//! than kept blocking the name. A node's TTL is fixed when it is handed over — with no
//! swap after that, a node's version only grows and a write at the version read cannot
//! land on a node it did not read.

use std::time::Duration;

use dlock_core::{FencingToken, Lease, LockError};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::ZkLock;
use crate::errors::from_zk;
use crate::node_lease::NodeLease;

/// What a handed-over node's data starts with; its TTL in milliseconds and the token
/// of the lease it carries follow. ZooKeeper shows clients a TTL node as a plain
/// persistent one (its `ephemeralOwner` reads 0), so the data is how `resume` and
/// renewals know the node; and the node's own creation zxid is the swap's — above those
/// of the waiters queued behind it — so the lease keeps the token it was granted with,
/// written here, and a waiter granted after it still gets a higher one.
const HANDED_OVER: &str = "dlock:handed-over";

/// A handed-over node as its data describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HandedOver {
    /// Whole milliseconds, as the server keeps a TTL.
    pub(crate) ttl: Duration,
    pub(crate) token: FencingToken,
}

impl HandedOver {
    /// The node `lease` is handed over to (its TTL cut to whole milliseconds: a
    /// lease's TTL may carry a fraction of one, the server's cannot).
    pub(crate) fn of(lease: &Lease) -> Self {
        Self {
            ttl: whole_millis(lease.ttl()),
            token: lease.token(),
        }
    }

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

/// `d` cut to whole milliseconds.
pub(crate) fn whole_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The fencing token of the lease a lock node stands for: its creation zxid, or the
/// one written in a handed-over node.
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

/// Whether a renewal whose stamps are `gap` apart and whose write took `rtt` leaves
/// the node safe for another `ttl` (see the module docs).
fn room_for(gap: Duration, rtt: Duration, ttl: Duration) -> bool {
    gap + rtt + ttl / 10 <= ttl
}

impl ZkLock {
    /// A renewal of a handed-over node: with the lease's TTL, which must be the
    /// node's, or (`adopt`, taking a ticket up) with the node's.
    pub(crate) async fn renew_handed_over(
        &self,
        lease: &Lease,
        adopt: bool,
    ) -> Result<Lease, LockError> {
        let held = lease.renewable_data::<NodeLease>()?;
        let lost = || LockError::lease_lost(lease.name());
        let client = held.slot.session.get().await?;
        // another process renewing the same ticket may write between our read and
        // write: read again then
        for _ in 0..5 {
            let read = client.get_data(&held.path);
            let (data, before) = match self.op("read node", async { Ok(read.await) }).await? {
                Ok(read) => read,
                Err(zk::Error::NoNode) => return Err(lost()),
                Err(e) => return Err(from_zk("read node", e)),
            };
            let node = match HandedOver::read(&data, &before) {
                Some(h) if h.token == lease.token() => h,
                _ => return Err(lost()),
            };
            if !adopt && node.ttl != whole_millis(lease.ttl()) {
                return Err(LockError::InvalidArgument(format!(
                    "a ZooKeeper ticket keeps the TTL it was handed over with ({} ms); this \
                     renewal asks for {} ms",
                    node.ttl.as_millis(),
                    lease.ttl().as_millis()
                )));
            }
            let sent = Instant::now();
            let written = client.set_data(&held.path, &data, Some(before.version));
            let after = match self.op("renew", async { Ok(written.await) }).await? {
                Ok(after) => after,
                Err(zk::Error::BadVersion) => continue,
                Err(zk::Error::NoNode) => return Err(lost()),
                Err(e) => return Err(from_zk("renew", e)),
            };
            let gap = Duration::from_millis(
                u64::try_from(after.mtime.saturating_sub(before.mtime)).unwrap_or(0),
            );
            if after.czxid != before.czxid {
                return Err(lost()); // not the node read: it went, and another came
            }
            if !room_for(gap, sent.elapsed(), node.ttl) {
                self.give_up(&client, &held.path, after.version).await;
                return Err(lost());
            }
            return Ok(lease.renewed(node.ttl, sent));
        }
        Err(LockError::transient(format!(
            "renewing {}: its node kept changing under other writers",
            lease.name()
        )))
    }

    /// Deletes a handed-over node whose lease was given up, if still at `version`.
    async fn give_up(&self, client: &zk::Client, path: &str, version: i32) {
        let delete = client.delete(path, Some(version));
        match self.op("delete node", async { Ok(delete.await) }).await {
            Ok(Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion)) => {}
            Ok(Err(e)) => {
                tracing::warn!(node = path, error = %e, "could not delete a ticket's node that ran out; the server deletes it");
            }
            Err(e) => {
                tracing::warn!(node = path, error = %e, "could not delete a ticket's node that ran out; the server deletes it");
            }
        }
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
    fn renewals_leave_room_for_the_write_and_the_clocks() {
        let ttl = Duration::from_secs(30);
        assert!(room_for(
            Duration::from_secs(10),
            Duration::from_millis(5),
            ttl
        ));
        // stamped just inside the TTL, but the write's round trip and the clocks'
        // margin leave no room: a delete may be decided on the old stamp
        assert!(!room_for(
            Duration::from_millis(29_995),
            Duration::from_millis(10),
            ttl
        ));
        assert!(room_for(Duration::from_secs(27), Duration::ZERO, ttl));
        assert!(!room_for(
            Duration::from_millis(27_001),
            Duration::ZERO,
            ttl
        ));
    }
}
