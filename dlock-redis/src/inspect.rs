//! Reading a lock's holder from one node: its owner, time left and token, and the
//! value it proclaimed.

use std::time::Duration;

use dlock_core::LockError;
use redis::Value;

use crate::keys::Keys;
use crate::node::Node;
use crate::scripts;

/// A lock's holder as one node reads it.
pub(crate) struct Inspected {
    pub(crate) owner: String,
    pub(crate) pttl: Duration,
    pub(crate) token: u64,
    /// The value this holder proclaimed, if any.
    pub(crate) proclaimed: Option<dlock_core::HolderValue>,
}

impl Node {
    /// The holder, if the lock key exists.
    pub(crate) async fn inspect(&self, keys: &Keys) -> Result<Option<Inspected>, LockError> {
        let (mut conn, mut again) = (self.conn.clone(), self.conn.clone());
        // sent together, in this order: the value key (tagged with the owner that wrote
        // it) is read after the holder, so it is never another holder's
        let (mut script, mut get) = (scripts::INSPECT.prepare_invoke(), redis::cmd("GET"));
        script.key(&keys.lock).key(&keys.fence);
        let holder = script.invoke_async::<(Value, i64, Option<u64>)>(&mut conn);
        let value = get
            .arg(&keys.value)
            .query_async::<Option<Vec<u8>>>(&mut again);
        let ((owner, pttl, token), value) = self
            .run("inspect", async {
                let (holder, value) = tokio::join!(holder, value);
                Ok((holder?, value?))
            })
            .await?;
        Ok(match owner {
            Value::BulkString(v) => {
                let owner = String::from_utf8_lossy(&v).into_owned();
                // another client's SET NX (the plain layout) holds no token of ours: the
                // counter is the last dlock holder's — report none (0) rather than it
                // a revoked holder's token is still its own
                let token = if minted_by_dlock(dlock_core::OwnerId::from_stored(&owner).unrevoked())
                {
                    token.unwrap_or(0)
                } else {
                    0
                };
                let pttl = Duration::from_millis(u64::try_from(pttl).unwrap_or(0));
                let proclaimed = crate::proclaim::proclaimed_by(&owner, value.as_deref());
                Some(Inspected {
                    owner,
                    pttl,
                    token,
                    proclaimed,
                })
            }
            _ => None,
        })
    }
}

/// Whether a lock key's value is a dlock owner id: 32 lowercase hex digits, alone or
/// followed by `.` and the holder's value.
fn minted_by_dlock(owner: &str) -> bool {
    let (id, rest) = owner.split_at(owner.len().min(32));
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && (rest.is_empty() || rest.starts_with('.'))
}

#[cfg(test)]
mod owner_tests {
    use super::minted_by_dlock;

    #[test]
    fn only_dlock_owner_ids_carry_our_token() {
        let id = "0123456789abcdef0123456789abcdef";
        assert!(minted_by_dlock(id));
        assert!(minted_by_dlock(&format!("{id}.web-7")));
        assert!(!minted_by_dlock("a3f9c2-rslock-random"));
        assert!(!minted_by_dlock(&format!("{id}x")));
        assert!(!minted_by_dlock(""));
    }
}
