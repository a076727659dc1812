//! Fenced writes on Redis: the value and its fence change in one script, or neither.

use std::sync::LazyLock;

use async_trait::async_trait;
use dlock_core::{Fence, FencingToken, LockError};
use redis::Script;

use crate::RedisLock;
use crate::key_space::KeySpace;
use crate::keys::escape;

/// KEYS: value key, fence key. ARGV: value, token. Writes the value and raises the
/// fence when the token is at least the fence; `{1, token}`, else `{0, fence}`.
static FENCED_SET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local t = tonumber(ARGV[2])
if t < cur then return {0, cur} end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return {1, t}
",
    )
});

/// KEYS: hash. ARGV: field, value, token, fence field. As `FENCED_SET`, for one
/// field of a hash, its fence kept in the same hash.
static FENCED_HSET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[4]) or '0')
local t = tonumber(ARGV[3])
if t < cur then return {0, cur} end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[3], ARGV[1], ARGV[2])
return {1, t}
",
    )
});

/// KEYS: value key, fence key. ARGV: token. Raises the fence and reads the value when
/// the token is at least the fence: `{1, token, 1, value}` (`{1, token, 0, ''}` when
/// the key is missing), else `{0, fence, 0, ''}`. Reads first: a key of the wrong type
/// fails the script before anything is written.
static FENCED_GET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local t = tonumber(ARGV[1])
if t < cur then return {0, cur, 0, ''} end
redis.call('SET', KEYS[2], ARGV[1])
if v then return {1, t, 1, v} end
return {1, t, 0, ''}
",
    )
});

/// KEYS: fence key. ARGV: token. Raises the fence alone.
static RAISE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local t = tonumber(ARGV[1])
if t < cur then return {0, cur} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, t}
",
    )
});

/// Fenced writes on the lock's Redis server: [`RedisFence::set`] and
/// [`RedisFence::hset`] write only under a token at least as high as every token that
/// wrote there before, value and fence in one script (no crash can separate them);
/// the [`Fence`] trait raises named marks alone.
///
/// ```no_run
/// use dlock_core::{FencingToken, LockError};
/// # async fn restock(lock: dlock_redis::RedisLock, token: FencingToken) -> Result<(), LockError> {
/// let fence = lock.fence();
/// let stock = fence.get("stock:sku-123", token).await?; // a later holder's read fences us off
/// let left = stock.and_then(|s| s.parse::<u32>().ok()).unwrap_or(0).saturating_sub(1);
/// fence.set("stock:sku-123", &left.to_string(), token).await?; // StaleToken if a later holder came
/// fence.hset("cart:7", "total", "99.50", token).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedisFence {
    at: KeySpace,
}

impl RedisLock {
    /// Fenced writes on this lock's server.
    #[must_use]
    pub fn fence(&self) -> RedisFence {
        RedisFence {
            at: self.key_space(),
        }
    }
}

/// The fence key of a value key, in the value key's Redis Cluster slot: next to its own
/// hash tag if it has one, else with the whole key as the tag — or, when the key holds
/// a `}` that would end that tag early, after a tag of the key's slot.
fn fence_key_of(key: &str) -> String {
    if crate::keys::has_hash_tag(key) {
        format!("{key}:dlock-fence")
    } else if !key.contains('}') {
        format!("{{{key}}}:dlock-fence")
    } else {
        let tag = crate::keys::slot_tag(crate::cluster::slot(key.as_bytes()));
        format!("{{{tag}}}:{key}:dlock-fence")
    }
}

fn judge(resource: &str, token: FencingToken, (ok, n): (i64, i64)) -> Result<(), LockError> {
    if ok == 1 {
        Ok(())
    } else {
        Err(LockError::stale_token(
            resource,
            u64::try_from(n).ok(),
            token,
        ))
    }
}

impl RedisFence {
    /// Sets `key` to `value` if `token` is at least `key`'s fence, and raises the fence
    /// (kept in a key beside it, `{key}:dlock-fence`, in the same cluster slot).
    ///
    /// # Errors
    /// [`LockError::StaleToken`] (nothing written); a server error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent leaves the write applied or not (whole:
    /// one script or one transaction): read before writing again.
    pub async fn set(&self, key: &str, value: &str, token: FencingToken) -> Result<(), LockError> {
        dlock_core::require_real_token(key, token)?;
        let mut call = FENCED_SET.prepare_invoke();
        call.key(key)
            .key(fence_key_of(key))
            .arg(value)
            .arg(token.get());
        let answer = self.at.node.invoke("fenced set", call).await?;
        judge(key, token, answer)
    }

    /// Reads `key` under `token`, raising its fence as [`RedisFence::set`] would: once
    /// a holder has read, an older holder can no longer write what it computed from an
    /// earlier read. Read with this at the start of a read-modify-write, then write
    /// with [`RedisFence::set`]: a stale holder that paused in between is refused.
    ///
    /// # Errors
    /// [`LockError::StaleToken`] (the fence is not raised); a server error.
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent may or may not have raised the key's
    /// fence (the read's one write); reading again with the same token is harmless.
    pub async fn get(&self, key: &str, token: FencingToken) -> Result<Option<String>, LockError> {
        dlock_core::require_real_token(key, token)?;
        let mut call = FENCED_GET.prepare_invoke();
        call.key(key).key(fence_key_of(key)).arg(token.get());
        let (ok, n, present, value): (i64, i64, i64, String) =
            self.at.node.invoke("fenced get", call).await?;
        judge(key, token, (ok, n))?;
        Ok((present == 1).then_some(value))
    }

    /// Sets `field` of hash `key` to `value` if `token` is at least that field's fence
    /// (kept in the same hash, field `dlock-fence:<field>`), and raises it.
    ///
    /// # Errors
    /// As [`RedisFence::set`].
    ///
    /// # Cancel safety
    /// Dropping it after the request was sent leaves the write applied or not (whole:
    /// one script or one transaction): read before writing again.
    pub async fn hset(
        &self,
        key: &str,
        field: &str,
        value: &str,
        token: FencingToken,
    ) -> Result<(), LockError> {
        dlock_core::require_real_token(key, token)?;
        let mut call = FENCED_HSET.prepare_invoke();
        call.key(key)
            .arg(field)
            .arg(value)
            .arg(token.get())
            .arg(format!("dlock-fence:{field}"));
        let answer = self.at.node.invoke("fenced hset", call).await?;
        judge(&format!("{key}#{field}"), token, answer)
    }
}

#[async_trait]
impl Fence for RedisFence {
    /// Raises the mark `PREFIXfence:{resource}`.
    async fn check_and_raise(&self, resource: &str, token: FencingToken) -> Result<(), LockError> {
        dlock_core::require_real_token(resource, token)?;
        let key = format!("{}fence:{{{}}}", self.at.prefix, escape(resource));
        let mut call = RAISE.prepare_invoke();
        call.key(key).arg(token.get());
        let answer = self.at.node.invoke("fence", call).await?;
        judge(resource, token, answer)
    }
}

#[cfg(test)]
mod tests {
    use super::fence_key_of;

    #[test]
    fn fence_keys_share_the_value_keys_slot() {
        assert_eq!(fence_key_of("stock:1"), "{stock:1}:dlock-fence");
        assert_eq!(fence_key_of("user:{42}:x"), "user:{42}:x:dlock-fence");
        for key in ["stock:1", "user:{42}:x", "odd:{}:x", "a}b", "x{}y{z}", "{"] {
            let slot = crate::cluster::slot(key.as_bytes());
            assert_eq!(
                crate::cluster::slot(fence_key_of(key).as_bytes()),
                slot,
                "{key}"
            );
        }
        assert_ne!(fence_key_of("a}b"), fence_key_of("a}c"));
    }
}
