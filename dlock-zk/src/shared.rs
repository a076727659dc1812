//! Semaphores and read-write locks on ZooKeeper: the mutex's queue of
//! ephemeral-sequential nodes in a queue node of their own, each node named with its
//! access (`<tag>-<owner>-<sequence>`, the tag `p<N>`, `r` or `w`). Core's queue rule
//! decides from the nodes ahead, and a waiter watches only the nodes that rule names.

use dlock_core::backend::{Standing, holds, standing};
use dlock_core::{Access, FencingToken, Holding, LockError, LockName, OwnerId};

use crate::ZkLock;
use crate::path::queue_dir;

/// The queue node of `name`'s semaphore (`ROOT/%sem:<encoded>`) or read-write lock
/// (`ROOT/%rw:<encoded>`): one path segment, which no mutex's can equal (an encoded
/// name never starts with `%s` or `%r`: a `%` becomes `%25`).
pub(crate) fn shared_dir(root: &str, name: &LockName, access: Access) -> String {
    let mutex = queue_dir(root, name);
    let encoded = &mutex[root.len() + 1..];
    let space = if access.is_rw() { "%rw:" } else { "%sem:" };
    format!("{root}/{space}{encoded}")
}

/// A shared node's name up to its sequence number.
pub(crate) fn shared_node_prefix(access: Access, owner: &str) -> String {
    format!("{}-{owner}-", access.tag())
}

/// A shared node's access, owner and sequence number. Neither the tag nor the owner id
/// (hex) holds a `-`, so the sequence, sign included, is all after the second one.
fn parts(node: &str) -> Option<(Access, &str, i32)> {
    let (tag, rest) = node.split_once('-')?;
    let (owner, seq) = rest.split_once('-')?;
    Some((Access::from_tag(tag)?, owner, seq.parse().ok()?))
}

/// The shared nodes in creation order (sequence numbers compared across a wrap, as
/// `path::lowest` does), with their accesses.
fn in_order(children: &[String]) -> Vec<(&String, Access, i32)> {
    let mut nodes: Vec<_> = children
        .iter()
        .filter_map(|c| parts(c).map(|(a, _, seq)| (c, a, seq)))
        .collect();
    if let Some(origin) = nodes.first().map(|n| n.2) {
        nodes.sort_by_key(|n| n.2.wrapping_sub(origin));
    }
    nodes
}

/// Where the node with sequence `seq` stands in `children`, and the nodes it must
/// watch.
pub(crate) fn stand(
    name: &LockName,
    access: Access,
    children: &[String],
    seq: i32,
) -> Result<(Standing, Vec<String>), LockError> {
    let ahead: Vec<_> = in_order(children)
        .into_iter()
        .filter(|n| n.2.wrapping_sub(seq) < 0)
        .collect();
    let accesses: Vec<Access> = ahead.iter().map(|n| n.1).collect();
    let here = standing(name, access, &accesses)?;
    let watch = match &here {
        Standing::Holds => Vec::new(),
        Standing::Waits(range) => ahead[range.clone()].iter().map(|n| n.0.clone()).collect(),
    };
    Ok((here, watch))
}

impl ZkLock {
    /// The holders of `name`'s semaphore or read-write lock: the nodes the queue rule
    /// lets hold, each with its czxid (its token).
    pub(crate) async fn shared_holders(
        &self,
        name: &LockName,
        of: Access,
    ) -> Result<Vec<Holding>, LockError> {
        let dir = shared_dir(&self.root, name, of);
        let client = self.sessions.first().session.get().await?;
        let children = match self
            .op("list queue", async { Ok(client.list_children(&dir).await) })
            .await?
        {
            Ok(c) => c,
            Err(zookeeper_client::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(crate::errors::from_zk("list queue", e)),
        };
        let nodes = in_order(&children);
        let all: Vec<Access> = nodes.iter().map(|n| n.1).collect();
        let mut out = Vec::new();
        for (i, (node, access, _)) in nodes.iter().enumerate() {
            if !holds(name, *access, &all[..i])? {
                continue;
            }
            let path = format!("{dir}/{node}");
            let Some(stat) = self.op("read holder", client.check_stat(&path)).await? else {
                continue;
            };
            let owner = parts(node).map_or("", |p| p.1);
            out.push(Holding::new(
                *access,
                OwnerId::from_stored(owner),
                FencingToken::from_signed(stat.czxid, "czxid")?,
                client.session_timeout(),
            ));
        }
        out.sort_by_key(|h| h.token);
        Ok(out)
    }

    /// Every holder of the semaphores and read-write locks among `queues` (the root's
    /// children) whose names start with `prefix`.
    pub(crate) async fn listed_shared(
        &self,
        queues: &[String],
        prefix: &str,
    ) -> Result<Vec<dlock_core::Held>, LockError> {
        let mut held = Vec::new();
        for queue in queues {
            let (encoded, access) = if let Some(e) = queue.strip_prefix("%sem:") {
                (e, Access::Permit(1))
            } else if let Some(e) = queue.strip_prefix("%rw:") {
                (e, Access::Read)
            } else {
                continue;
            };
            let Some(Ok(name)) = crate::path::name_of(encoded)
                .filter(|n| n.starts_with(prefix))
                .map(|n| LockName::new(&n))
            else {
                continue;
            };
            for holding in self.shared_holders(&name, access).await? {
                held.push(dlock_core::Held::shared(name.clone(), holding));
            }
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_queues_never_meet_a_mutex_queue() {
        let n = LockName::new("a").unwrap();
        assert_eq!(shared_dir("/dlock", &n, Access::Permit(2)), "/dlock/%sem:a");
        assert_eq!(shared_dir("/dlock", &n, Access::Read), "/dlock/%rw:a");
        let tricky = LockName::new("%sem:a").unwrap();
        assert_ne!(
            queue_dir("/dlock", &tricky),
            shared_dir("/dlock", &n, Access::Permit(2))
        );
    }

    #[test]
    fn nodes_are_ordered_across_the_sequence_wrap() {
        let name = LockName::new("a").unwrap();
        let children = vec![
            "w-bb-2147483647".to_owned(),
            "r-aa-2147483646".to_owned(),
            "r-cc--2147483648".to_owned(),
        ];
        // the reader created after the wrap waits for the writer before it
        let (here, watch) = stand(&name, Access::Read, &children, i32::MIN).unwrap();
        assert_eq!(here, Standing::Waits(1..2));
        assert_eq!(watch, vec!["w-bb-2147483647".to_owned()]);
        assert_eq!(
            stand(&name, Access::Read, &children, 2_147_483_646)
                .unwrap()
                .0,
            Standing::Holds
        );
    }
}
