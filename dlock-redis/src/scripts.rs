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

/// KEYS: lock, fence. ARGV: owner, ttl ms, proposed token, restart delay s, how far
/// ahead µs, the highest counter the round's nodes named (0 at first). Redlock's grant: the lock at exactly the proposed token, or nothing.
/// Returns `{1, token, 0}` when taken, `{0, pttl, 0}` of another holder, `{2, counter,
/// server TIME in µs}` when the proposal is refused (the client proposes again above
/// both), `{3, ms, 0}` while the node rests after a restart, or `{4, 0, 0}` when it
/// cannot tell how long it has been up (its ACL denies `INFO`): it grants nothing then.
///
/// A node up for less than the restart delay grants nothing (Redlock's *delayed
/// restart*): a node that comes back empty — no persistence, or an old snapshot — has
/// forgotten the keys and counters it granted, and a quorum made with nodes that missed
/// those grants could otherwise grant a name held elsewhere, or a token below one
/// already handed out. Resting past the longest TTL lets every lease it forgot run out,
/// and past "how far ahead" lets the others' clocks pass every token it granted.
///
/// A proposal is taken only above the counter and at or above the server's clock in
/// µs (the same hybrid clock as [`ACQUIRE`], so a node restored from an old snapshot
/// cannot repeat a token). Since every node of a round grants the same token or none,
/// a reader that finds the holder on a quorum of nodes reads its token from any of
/// them: no node's counter is raised after the grants are visible.
///
/// A proposal more than "how far ahead" (2 s) past the node's clock — or past the
/// highest counter the round's nodes named, when that is higher — is refused too: it
/// comes from a client whose clock is ahead (a bad RTC, a mistyped `date -s`), and
/// taking it would carry the name's tokens that far past the nodes' clocks — where a
/// node that missed the grant and one that lost it could make a quorum below it — and,
/// far enough, past 2⁵³ µs (year 2255), where Lua's numbers stop counting by one. The
/// client then proposes from what the nodes named: their counters and clocks, never
/// its own clock. The bound is not measured from the node's own counter: a counter a
/// skewed client carried ahead would then let the next skewed client carry it further,
/// 2 s a grant. Counters ahead of the clocks (a node whose clock stepped back) are
/// still passed, in the round's next proposal, above the highest one named.
///
/// A key that already holds our owner id (an earlier attempt of this acquisition that
/// committed after its reply was given up on) is taken again at the proposal. A
/// refused proposal leaves no key of ours behind, whichever attempt set it.
pub(crate) static PROPOSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local rest = tonumber(ARGV[4])
if rest > 0 then
  -- pcall: an ACL without INFO (it is @dangerous) must refuse the grant, not fail open
  local info = redis.pcall('INFO', 'server')
  local up = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not up then
    return {4, 0, 0}
  end
  if up < rest then
    return {3, (rest - up) * 1000, 0}
  end
end
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
local floor = math.max(t, tonumber(ARGV[6]))
if p <= c or p < t or p > floor + tonumber(ARGV[5]) then
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

/// The scripts on a real server (`DLOCK_TEST_REDIS_URL`; `scripts/test --quick`, which
/// starts none, skips them by this module's name).
#[cfg(test)]
mod redis_server_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::PROPOSE;
    use crate::quorum::MAX_AHEAD_MICROS;

    fn test_url() -> String {
        dlock_conformance::required_env("DLOCK_TEST_REDIS_URL")
    }

    async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
        redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// A fresh name's lock and fence keys (one hash slot).
    fn keys(what: &str) -> (String, String) {
        let tag = format!("{{dlock-test:{what}-{:016x}}}", dlock_core::random_u64());
        (format!("{tag}:lock"), format!("{tag}:fence"))
    }

    async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
        s * 1_000_000 + us
    }

    /// How many of `keys` exist.
    async fn existing(c: &mut redis::aio::MultiplexedConnection, keys: &[&str]) -> i64 {
        redis::cmd("EXISTS").arg(keys).query_async(c).await.unwrap()
    }

    /// Deletes `keys`.
    async fn delete(c: &mut redis::aio::MultiplexedConnection, keys: &[&str]) {
        let _: () = redis::cmd("DEL").arg(keys).query_async(c).await.unwrap();
    }

    /// Fails on a script that takes any proposal: a client clock ten years ahead set
    /// the name's token ten years ahead.
    #[tokio::test]
    async fn a_proposal_far_ahead_of_the_server_clock_is_ignored() {
        let mut c = connect(&test_url()).await;
        let (lock, fence) = keys("proposal");
        let acquire = |proposal: u64| propose(&lock, &fence, proposal, 0, 0);

        let now = server_micros(&mut c).await;
        let ten_years = 10 * 365 * 86_400 * 1_000_000_u64;
        let (answer, counter, clock): (i64, u64, u64) =
            acquire(now + ten_years).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, counter), (2, 0), "refused, naming the counter");
        assert!(
            clock >= now && clock < now + 60_000_000,
            "and the server clock ({clock} µs, {now} before)"
        );
        let exists = existing(&mut c, &[&lock]).await;
        assert_eq!(exists, 0, "a refused proposal leaves no lock key behind");

        // five seconds ahead is too far as well (a client clock a little ahead): taken,
        // it would carry the name's tokens past the other nodes' clocks
        let now = server_micros(&mut c).await;
        let (answer, _, _): (i64, u64, u64) =
            acquire(now + 5_000_000).invoke_async(&mut c).await.unwrap();
        assert_eq!(answer, 2, "a proposal 5 s ahead is refused");

        // a proposal a second ahead, as Redlock makes, is taken at exactly that token
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (taken, next, _): (i64, u64, u64) =
            acquire(proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((taken, next), (1, proposal));

        // once released, the same proposal again is at the counter: refused
        delete(&mut c, &[&lock]).await;
        let (answer, counter, _): (i64, u64, u64) =
            acquire(proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, counter), (2, proposal));

        // a node whose counter stands two minutes past its clock (the clock stepped
        // back) names it, and takes its successor once the round passes it on
        let ahead = server_micros(&mut c).await + 120_000_000;
        let _: () = redis::cmd("SET")
            .arg(&fence)
            .arg(ahead)
            .query_async(&mut c)
            .await
            .unwrap();
        let (answer, counter, _): (i64, u64, u64) =
            acquire(ahead + 1).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, counter), (2, ahead), "refused, naming its counter");
        let (taken, next, _): (i64, u64, u64) = propose(&lock, &fence, ahead + 1, 0, ahead)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!((taken, next), (1, ahead + 1));
        delete(&mut c, &[&lock, &fence]).await;
    }

    /// PROPOSE for `owner-1` (TTL 10 s) at `proposal`, with a restart delay of `rest`
    /// seconds and the round's highest named counter `highest`.
    fn propose(
        lock: &str,
        fence: &str,
        proposal: u64,
        rest: u64,
        highest: u64,
    ) -> redis::ScriptInvocation<'static> {
        let mut inv = PROPOSE.key(lock);
        inv.key(fence)
            .arg("owner-1")
            .arg(10_000)
            .arg(proposal)
            .arg(rest)
            .arg(MAX_AHEAD_MICROS)
            .arg(highest);
        inv
    }

    /// Fails on a bound measured from the node's own counter: a counter a client whose
    /// clock is ahead carried 1.9 s past the clock let the next such client take a
    /// token 3.5 s ahead, and so on, 2 s a grant.
    #[tokio::test]
    async fn tokens_do_not_ratchet_ahead_of_the_clock() {
        let mut c = connect(&test_url()).await;
        let (lock, fence) = keys("ratchet");
        let now = server_micros(&mut c).await;
        let _: () = redis::cmd("SET")
            .arg(&fence)
            .arg(now + 1_900_000)
            .query_async(&mut c)
            .await
            .unwrap();
        let (answer, counter, _): (i64, u64, u64) = propose(&lock, &fence, now + 3_500_000, 0, 0)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!((answer, counter), (2, now + 1_900_000), "refused");
        // the round's next proposal follows the counter and clock the node named
        let next = counter + 1;
        let (taken, token, _): (i64, u64, u64) = propose(&lock, &fence, next, 0, counter)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!((taken, token), (1, next));
        delete(&mut c, &[&lock, &fence]).await;
    }

    /// Fails on a script without a delayed restart: a node up for less than the
    /// restart delay granted at once.
    #[tokio::test]
    async fn a_node_up_for_less_than_the_restart_delay_grants_nothing() {
        let mut c = connect(&test_url()).await;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut c)
            .await
            .unwrap();
        let up: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let (lock, fence) = keys("resting");
        let propose = |delay: u64, proposal: u64| propose(&lock, &fence, proposal, delay, 0);
        // a delay an hour past this server's uptime: it has just "restarted"
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (answer, left_ms, _): (i64, u64, u64) = propose(up + 3600, proposal)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!(answer, 3, "a resting node refuses the grant");
        assert!(
            (3_599_000..=3_601_000).contains(&left_ms),
            "and says how long it rests: {left_ms} ms"
        );
        let exists = existing(&mut c, &[&lock, &fence]).await;
        assert_eq!(exists, 0, "and writes nothing");
        // up longer than the delay (or no delay): granted
        assert!(up >= 1, "the test server has been up a second");
        for delay in [up, 0] {
            let proposal = server_micros(&mut c).await + 1_000_000;
            let (answer, token, _): (i64, u64, u64) =
                propose(delay, proposal).invoke_async(&mut c).await.unwrap();
            assert_eq!((answer, token), (1, proposal), "delay {delay} s, up {up} s");
            delete(&mut c, &[&lock]).await;
        }
        delete(&mut c, &[&fence]).await;
    }

    /// Fails on a script that reads the uptime with `redis.call` (every acquisition of
    /// such a user errs with NOPERM) or grants when it cannot read it (`or ARGV[4]`,
    /// failing open): a user whose ACL denies `INFO` is refused (answer 4) and nothing
    /// is written, and granted when the restart delay is off.
    #[tokio::test]
    async fn a_node_that_cannot_read_its_uptime_grants_nothing() {
        let url = test_url();
        let mut admin = connect(&url).await;
        let user = format!("dlock-test-noinfo-{:016x}", dlock_core::random_u64());
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", &user, "on", ">pw", "~*", "&*", "+@all", "-info"])
            .query_async(&mut admin)
            .await
            .unwrap();
        let as_user = url.replacen("redis://", &format!("redis://{user}:pw@"), 1);
        let mut c = connect(&as_user).await;
        let (lock, fence) = keys("noinfo");
        for (delay, answer) in [(60, 4), (0, 1)] {
            let proposal = server_micros(&mut c).await + 1_000_000;
            let (got, _, _): (i64, u64, u64) = propose(&lock, &fence, proposal, delay, 0)
                .invoke_async(&mut c)
                .await
                .unwrap();
            assert_eq!(got, answer, "restart delay {delay} s");
            if delay > 0 {
                let exists = existing(&mut c, &[&lock, &fence]).await;
                assert_eq!(exists, 0, "a refused grant writes nothing");
            }
        }
        delete(&mut admin, &[&lock, &fence]).await;
        let _: () = redis::cmd("ACL")
            .arg(&["DELUSER", &user])
            .query_async(&mut admin)
            .await
            .unwrap();
    }
}
