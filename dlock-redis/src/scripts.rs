//! The Lua scripts: each operation is one round trip and atomic on the server.

use std::sync::LazyLock;

use redis::Script;

/// KEYS: lock, fence. ARGV: owner, ttl ms, proposed token (0: none). Returns
/// `{1, token}` when taken, else `{0, pttl}` of the holder.
///
/// The token is a hybrid clock: `max(counter + 1, server TIME in µs, proposal)`, written
/// back to the counter, which never expires. (Redlock proposes a token a little ahead
/// of the client's clock, so that nodes whose counters are in step answer the same
/// token and no second round is needed to settle them; a proposal only ever raises a
/// token.) While a lock is held its counter is its holder's
/// token. A counter that comes back *older* — a restore from an RDB/AOF snapshot,
/// `appendfsync everysec`, a failover to a lagging replica, a restart without
/// persistence — cannot make a token repeat: the next one is at least the server's
/// clock, which is above every token handed out before as long as fewer than one
/// acquisition per microsecond happened on average and the server clock did not step
/// back by more than the tokens issued since (the one assumption left).
///
/// A key that already holds our owner id is taken again (TTL refreshed, same token):
/// an earlier attempt of this acquisition committed after its reply was given up on.
/// `SET … NX GET` (Redis 7) returns the value it found, so this costs nothing on the
/// uncontended path.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local found = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if found then
  if found ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]))}
end
local now = redis.call('TIME')
local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
local p = tonumber(ARGV[3])
if p > t then t = p end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c >= t then t = c + 1 end
redis.call('SET', KEYS[2], string.format('%d', t))
return {1, t}
",
    )
});

/// KEYS: fence. ARGV: token. Redlock's second round: raises the counter to at least
/// `token`, so every later quorum, which must overlap this one, counts above it.
pub(crate) static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
",
    )
});

/// KEYS: lock. ARGV: owner, channel. Deletes the key if our owner id (unique per
/// acquisition) still holds it, and wakes waiters.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
",
    )
});

/// KEYS: lock₁…lockₙ. ARGV: owner₁, ttl ms₁, …, ownerₙ, ttl msₙ. Extends each key whose
/// owner id still holds it; returns one 1 (renewed) or 0 (not held) per key, in order.
/// Every renewal due in one tick goes out in one call (see `renewals`).
pub(crate) static RENEW_MANY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2 * i])
  else
    out[i] = 0
  end
end
return out
",
    )
});

/// KEYS: lock, fence. Returns `{owner, pttl, token}` (`false` owner when free): one
/// round trip for `inspect`.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
",
    )
});
