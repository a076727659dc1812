//! The Lua scripts: each operation is one round trip and atomic on the server.

use std::sync::LazyLock;

use redis::Script;

/// KEYS: lock, fence. ARGV: owner, ttl ms. Returns `{1, token}` when taken, else
/// `{0, pttl}` of the holder.
///
/// The token is a hybrid clock: `max(counter + 1, server TIME in µs)`, written back to
/// the counter (without expiry while held; see `RELEASE`). While a lock is held its counter is its holder's
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
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c >= t then t = c + 1 end
redis.call('SET', KEYS[2], string.format('%d', t))
return {1, t}
",
    )
});

/// KEYS: lock, fence. ARGV: owner, ttl ms, proposed token. Redlock's grant: the lock
/// at exactly the proposed token, or nothing. Returns `{1, token, 0}` when taken, `{0,
/// pttl, 0}` of another holder, or `{2, counter, server TIME in µs}` when the proposal
/// is refused: the client proposes again above both.
///
/// A proposal is taken only above the counter and at or above the server's clock in
/// µs (the same hybrid clock as [`ACQUIRE`], so a node restored from an old snapshot
/// cannot repeat a token). Since every node of a round grants the same token or none,
/// a reader that finds the holder on a quorum of nodes reads its token from any of
/// them: no node's counter is raised after the grants are visible.
///
/// A proposal more than 60 s ahead of the node's own next token (`max(counter + 1,
/// clock)`) is refused too: it comes from a client whose clock was stepped ahead (a
/// bad RTC, a mistyped `date -s`), and taking it would move every later token on the
/// name that far ahead for good — past 2⁵³ µs (year 2255), where Lua's numbers stop
/// counting by one and tokens would repeat. (Measured from the next token, not the
/// clock alone, so a node whose clock stepped back below its counter still takes the
/// counter's successor.)
///
/// A key that already holds our owner id (an earlier attempt of this acquisition that
/// committed after its reply was given up on) is taken again at the proposal. A
/// refused proposal leaves no key of ours behind, whichever attempt set it.
pub(crate) static PROPOSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local found = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if found and found ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1]), 0}
end
local now = redis.call('TIME')
local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local p = tonumber(ARGV[3])
if found and p == c then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, p, 0}
end
local floor = t
if c + 1 > floor then floor = c + 1 end
if p <= c or p < t or p > floor + 60000000 then
  redis.call('DEL', KEYS[1])
  return {2, c, t}
end
if found then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
redis.call('SET', KEYS[2], ARGV[3])
return {1, p, 0}
",
    )
});

/// KEYS: lock, fence. ARGV: owner, channel, counter retention ms, `PUBLISH` (`SPUBLISH`
/// on a cluster: the channel shares the keys' slot). Deletes the key if our owner id
/// (unique per acquisition) still holds it, and wakes waiters.
///
/// The fencing counter then expires after the retention (plus however far it runs
/// ahead of the server clock), unless a new holder takes the name first (its `SET`
/// clears the expiry): a name nobody uses leaves no key behind. Its next token is at
/// least the server clock, so above every token the counter gave as long as the clock
/// does not step back by more than the retention. A crashed holder's counter, never
/// released, keeps no expiry.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if c > 0 then
    local now = redis.call('TIME')
    local ahead = c - (tonumber(now[1]) * 1000000 + tonumber(now[2]))
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + math.max(0, math.ceil(ahead / 1000)))
  end
  redis.call('DEL', KEYS[1])
  -- pcall: the release is done; a publish refused (no SPUBLISH before Redis 7, an
  -- ACL without it) must not report it failed — waiters then find out by polling
  redis.pcall(ARGV[4], ARGV[2], 'released')
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
    use super::PROPOSE;

    async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
        s * 1_000_000 + us
    }

    /// Fails on a script that takes any proposal: a client clock ten years ahead set
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
            let mut inv = PROPOSE.key(&lock);
            inv.key(&fence).arg("owner-1").arg(10_000).arg(proposal);
            inv
        };

        let now = server_micros(&mut c).await;
        let ten_years = 10 * 365 * 86_400 * 1_000_000_u64;
        let (answer, counter, clock): (i64, u64, u64) =
            acquire(now + ten_years).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, counter), (2, 0), "refused, naming the counter");
        assert!(
            clock >= now && clock < now + 60_000_000,
            "and the server clock ({clock} µs, {now} before)"
        );
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&lock)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(exists, 0, "a refused proposal leaves no lock key behind");

        // a proposal a second ahead, as Redlock makes, is taken at exactly that token
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (taken, next, _): (i64, u64, u64) =
            acquire(proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((taken, next), (1, proposal));

        // once released, the same proposal again is at the counter: refused
        let _: () = redis::cmd("DEL")
            .arg(&lock)
            .query_async(&mut c)
            .await
            .unwrap();
        let (answer, counter, _): (i64, u64, u64) =
            acquire(proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, counter), (2, proposal));

        // a node whose counter stands two minutes past its clock (the clock stepped
        // back) still takes the counter's successor
        let ahead = server_micros(&mut c).await + 120_000_000;
        let _: () = redis::cmd("SET")
            .arg(&fence)
            .arg(ahead)
            .query_async(&mut c)
            .await
            .unwrap();
        let (taken, next, _): (i64, u64, u64) =
            acquire(ahead + 1).invoke_async(&mut c).await.unwrap();
        assert_eq!((taken, next), (1, ahead + 1));
        let _: () = redis::cmd("DEL")
            .arg(&lock)
            .arg(&fence)
            .query_async(&mut c)
            .await
            .unwrap();
    }
}
