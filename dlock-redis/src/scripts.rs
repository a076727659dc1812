//! The Lua scripts: each operation is one round trip and atomic on the server.

use std::sync::LazyLock;

use redis::Script;

/// KEYS: lock, fence. ARGV: owner, ttl ms, proposed token (0: none). Returns
/// `{1, token}` when taken, else `{0, pttl}` of the holder.
///
/// The token is a hybrid clock: `max(counter + 1, server TIME in µs, proposal)` (a
/// proposal counts only within 60 s of the server's clock, see below), written
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
/// A proposal more than 60 s ahead of the server's clock is ignored: it comes from a
/// client whose clock was stepped ahead (a bad RTC, a mistyped `date -s`), and taking
/// it would move every later token on the name that far ahead for good — past 2⁵³ µs
/// (year 2255), where Lua's numbers stop counting by one and tokens would repeat.
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
if p > t and p <= t + 60000000 then t = p end
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::ACQUIRE;

    async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
        s * 1_000_000 + us
    }

    /// Fails on the script that took any proposal: a client clock ten years ahead set
    /// the name's token ten years ahead.
    #[tokio::test]
    async fn a_proposal_far_ahead_of_the_server_clock_is_ignored() {
        let url = dlock_conformance::required_env("DLOCK_TEST_REDIS_URL");
        let mut c = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let tag = format!("{{dlock-test:proposal-{:016x}}}", dlock_core::random_u64());
        let (lock, fence) = (format!("{tag}:lock"), format!("{tag}:fence"));
        let acquire = |proposal: u64| {
            let mut inv = ACQUIRE.key(&lock);
            inv.key(&fence).arg("owner-1").arg(10_000).arg(proposal);
            inv
        };

        let now = server_micros(&mut c).await;
        let ten_years = 10 * 365 * 86_400 * 1_000_000_u64;
        let (taken, token): (i64, u64) =
            acquire(now + ten_years).invoke_async(&mut c).await.unwrap();
        assert_eq!(taken, 1);
        assert!(
            token >= now && token < now + 60_000_000,
            "token {token} follows the server clock ({now} µs), not the proposal"
        );

        // a proposal a second ahead, as Redlock makes, is still taken
        let _: () = redis::cmd("DEL")
            .arg(&lock)
            .query_async(&mut c)
            .await
            .unwrap();
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (taken, next): (i64, u64) = acquire(proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((taken, next), (1, proposal));
        let _: () = redis::cmd("DEL")
            .arg(&lock)
            .arg(&fence)
            .query_async(&mut c)
            .await
            .unwrap();
    }
}
