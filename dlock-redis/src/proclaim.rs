//! A holder's proclaimed value (`DistributedLock::proclaim`): a key beside the lock
//! key, `…:value`, holding the proclaiming owner id and the value, written only while
//! the lock key holds that owner id and read back only while it still does — so a
//! value never passes to the next holder. The key has no expiry (a leader may lead for
//! longer than any retention): one per name that ever proclaimed, overwritten by its
//! next proclaim.

use std::sync::LazyLock;

use dlock_core::HolderValue;
use dlock_core::LockError;
use redis::Script;

use crate::keys::Keys;
use crate::node::Node;

/// KEYS: lock, value. ARGV: owner, value, release channel, `PUBLISH` (`SPUBLISH` on a
/// cluster). Returns 1, or 0 when not the holder. Announced on the release channel, so
/// leader watches see it at once.
static PROCLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1] .. '\n' .. ARGV[2])
-- pcall: proclaimed already; a refused publish leaves watches to look at their pace
redis.pcall(ARGV[4], ARGV[3], 'proclaimed')
return 1
",
    )
});

/// The value in a value key's text, if `owner` proclaimed it.
pub(crate) fn proclaimed_by(owner: &str, text: Option<&[u8]>) -> Option<HolderValue> {
    let text = std::str::from_utf8(text?).ok()?;
    let (by, value) = text.split_once('\n')?;
    (by == owner).then(|| HolderValue::new(value).ok())?
}

impl Node {
    /// Writes `value` for the holder `owner` of `keys`: whether it still held.
    pub(crate) async fn proclaim(
        &self,
        keys: &Keys,
        owner: &str,
        value: &HolderValue,
    ) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let n: i64 = self
            .run(
                "proclaim",
                PROCLAIM
                    .key(&keys.lock)
                    .key(&keys.value)
                    .arg(owner)
                    .arg(value.as_str())
                    .arg(&keys.channel)
                    .arg(self.conn.publish_command())
                    .invoke_async(&mut conn),
            )
            .await?;
        Ok(n == 1)
    }
}

impl crate::Redlock {
    /// Writes `value` on every node that still holds `lease`: proclaimed once a
    /// quorum has it.
    pub(crate) async fn proclaim_on_quorum(
        &self,
        lease: &dlock_core::Lease,
        value: &HolderValue,
    ) -> Result<(), LockError> {
        dlock_core::backend::proclaimable("redlock", lease)?;
        let keys = Keys::new(&self.opts, lease.name());
        let (owner, value) = (lease.owner().as_str().to_owned(), value.clone());
        let round = self
            .tally_bool(move |n| {
                let (k, o, v) = (keys.clone(), owner.clone(), value.clone());
                async move { n.proclaim(&k, &o, &v).await }
            })
            .await;
        match proclaim_outcome(
            round.ok.len(),
            round.refused,
            self.nodes.len(),
            self.quorum(),
        ) {
            Proclaimed::Done => Ok(()),
            Proclaimed::Lost => Err(LockError::lease_lost(lease.name())),
            Proclaimed::Unknown if round.failures > self.nodes.len() - self.quorum() => {
                Err(self.quorum_unreachable(round.failures, round.failed))
            }
            Proclaimed::Unknown => Err(LockError::transient(format!(
                "proclaiming for {}: {} of {} nodes have the value, {} did not answer; \
                 the lease may still hold: proclaim again",
                lease.name(),
                round.ok.len(),
                self.nodes.len(),
                round.failures
            ))),
        }
    }

    /// The value a quorum of nodes hold for the holder (`values`: one entry per node
    /// that holds the lock for it, `None` where it holds no value): a proclaim is one
    /// once a quorum has it, so a value fewer nodes hold — a proclaim that failed — is
    /// never reported.
    pub(crate) fn agreed(&self, values: Vec<Option<HolderValue>>) -> Option<HolderValue> {
        agreed_by(values, self.quorum())
    }
}

/// What a proclaim round came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proclaimed {
    /// A quorum holds the lease and has the value.
    Done,
    /// Too many nodes answered that they do not hold the lease for a quorum to hold it.
    Lost,
    /// Neither: nodes that did not answer may hold it (the lease may be intact, the
    /// value on fewer than a quorum).
    Unknown,
}

/// A proclaim round's outcome from its answers: `ok` nodes hold the lease and took the
/// value, `refused` answered that they do not hold it, of `nodes` with `quorum`. Only
/// refusals prove the lease gone; a node that did not answer may hold it still.
pub fn proclaim_outcome(ok: usize, refused: usize, nodes: usize, quorum: usize) -> Proclaimed {
    if ok >= quorum {
        Proclaimed::Done
    } else if refused > nodes.saturating_sub(quorum) {
        Proclaimed::Lost
    } else {
        Proclaimed::Unknown
    }
}

/// The value at least `quorum` of `values` are.
fn agreed_by(values: Vec<Option<HolderValue>>, quorum: usize) -> Option<HolderValue> {
    let mut counts: Vec<(HolderValue, usize)> = Vec::new();
    for v in values.into_iter().flatten() {
        match counts.iter_mut().find(|(c, _)| *c == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    counts
        .into_iter()
        .find(|(_, n)| *n >= quorum)
        .map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_refusals_prove_a_proclaim_lost() {
        // five nodes, quorum three
        assert_eq!(proclaim_outcome(3, 0, 5, 3), Proclaimed::Done);
        // held on three, one of them timed out, two never held it: intact, unknown
        assert_eq!(proclaim_outcome(2, 2, 5, 3), Proclaimed::Unknown);
        assert_eq!(proclaim_outcome(2, 3, 5, 3), Proclaimed::Lost);
        assert_eq!(proclaim_outcome(0, 0, 5, 3), Proclaimed::Unknown);
    }

    #[test]
    fn a_value_belongs_to_its_owner_only() {
        let text = b"0123abcd\n10.0.0.7:80".as_slice();
        assert_eq!(
            proclaimed_by("0123abcd", Some(text)).map(|v| v.as_str().to_owned()),
            Some("10.0.0.7:80".to_owned())
        );
        assert_eq!(proclaimed_by("ffff0000", Some(text)), None);
        assert_eq!(proclaimed_by("0123abcd", None), None);
        assert_eq!(
            proclaimed_by("0123abcd", Some(b"0123abcd".as_slice())),
            None
        );
    }

    #[test]
    fn redlock_reports_a_value_a_quorum_holds() {
        let v = |s: &str| Some(HolderValue::new(s).unwrap());
        assert_eq!(agreed_by(vec![v("a"), v("b"), v("a"), v("a")], 3), v("a"));
        // a first proclaim that reached one node of the holder's three failed
        assert_eq!(agreed_by(vec![v("b"), None, None], 3), None);
        assert_eq!(agreed_by(vec![v("a"), v("b"), v("a")], 3), None);
        assert_eq!(agreed_by(Vec::new(), 3), None);
    }
}
