//! The Lua scripts: each operation is one round trip and atomic on the server.

use std::sync::LazyLock;

use redis::Script;

use crate::queue::QUEUE_LUA;

/// The exclusive lock's hand-off (Lua), after [`QUEUE_LUA`]: KEYS[1] is the lock,
/// KEYS[2] its fencing counter.
///
/// - `next_token(us)` → the next token, a hybrid clock: `max(counter + 1, server TIME
///   in µs)`, written back to the counter (see [`ACQUIRE`]);
/// - `hand_over(now, us, caller)` → gives the free lock to the oldest
///   live waiter with its TTL and the next token and tells it (unless it is `caller`,
///   who hears it in the script's answer); the new holder and token, or `nil` when no
///   one waits.
const HAND_OVER: &str = r"
local function next_token(us)
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if c >= us then us = c + 1 end
  redis.call('SET', KEYS[2], string.format('%d', us))
  return us
end
local function hand_over(now, us, caller)
  local head, ttl = q_head(now)
  if not head then return nil end
  q_pop(head)
  redis.call('SET', KEYS[1], head, 'PX', ttl)
  local t = next_token(us)
  if head ~= caller then q_tell(head, t) end
  return head, t
end
";

/// KEYS: lock, fence, queue, waiters. ARGV: owner, ttl ms, waits (0: no, 1: yes, 2:
/// yes and listening on its channel already), liveness ms, release channel, `PUBLISH`
/// (`SPUBLISH` on a cluster), FIFO (1: the queue is used; 0: the plain key layout,
/// whose names can share companion keys, and Redlock's nodes: it is not touched). Returns `{1, token, 0}` when
/// taken, else `{0, pttl of the holder, counter}` — and, when the caller waits, it is
/// queued (`queue.rs`) until its next attempt plus the liveness window. The counter is
/// the token of the holder as the server saw it then: a grant message with a token not
/// above it is older than this answer.
///
/// The token is a hybrid clock: `max(counter + 1, server TIME in µs)`, written back to
/// the counter (without expiry while held; see `RELEASE`). While a lock is held its
/// counter is its holder's token. A counter that comes back *older* — a restore from an
/// RDB/AOF snapshot, `appendfsync everysec`, a failover to a lagging replica, a restart
/// without persistence — cannot make a token repeat: the next one is at least the
/// server's clock, which is above every token handed out before as long as fewer than
/// one acquisition per microsecond happened on average and the server clock did not
/// step back by more than the tokens issued since (the one assumption left).
///
/// With nobody queued the lock is one `SET … NX PX … GET` (Redis 7), as cheap as it
/// gets. A key that already holds our owner id is taken again (TTL refreshed, same
/// token): an earlier attempt of this acquisition committed after its reply was given
/// up on, or a release granted it to us while we queued. With others queued the lock is
/// never taken past them: a free lock goes to the queue's head (which may be us).
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    // the uncontended path first, before the queue's functions are even defined
    Script::new(&format!(
        "{}{QUEUE_LUA}{HAND_OVER}{}",
        r"
local QK, WK, CH, PUB = KEYS[3], KEYS[4], ARGV[5], ARGV[6]
local owner, FIFO = ARGV[1], ARGV[7] == '1'
local waits = FIFO and ARGV[3] ~= '0'
if not FIFO or redis.call('EXISTS', QK) == 0 then
  -- GET, then SET: a script runs whole, and SET NX GET is Redis 7's (6.2 refuses it)
  local found = redis.call('GET', KEYS[1])
  if not found then redis.call('SET', KEYS[1], owner, 'PX', ARGV[2]) end
  if not found then
    local now = redis.call('TIME')
    local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
    local c = tonumber(redis.call('GET', KEYS[2]) or '0')
    if c >= t then t = c + 1 end
    redis.call('SET', KEYS[2], string.format('%d', t))
    return {1, t, 0}
  end
  if found == owner then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(redis.call('GET', KEYS[2])), 0}
  end
  if not waits then
    return {0, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
  end
end
",
        r"
local function held(now)
  if waits then
    q_join(owner, now, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[2]), 'x', 0)
  end
  return {0, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local holder = redis.call('GET', KEYS[1])
if holder == owner then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  q_leave(owner)
  return {1, tonumber(redis.call('GET', KEYS[2])), 0}
end
local now, us = q_clock()
if not holder then
  local head, t = hand_over(now, us, owner)
  if head == owner then return {1, t, 0} end
  if not head then
    redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
    return {1, next_token(us), 0}
  end
end
return held(now)
"
    ))
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
local found = redis.call('GET', KEYS[1])
if not found then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
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

/// KEYS: lock, fence, queue, waiters. ARGV: owner, release channel, counter retention
/// ms, `PUBLISH` (`SPUBLISH` on a cluster: the channel shares the keys' slot), FIFO (as
/// [`ACQUIRE`]'s: 0 leaves the queue keys alone). Deletes
/// the key if our owner id (unique per acquisition) still holds it and hands the lock
/// to the oldest live waiter (`queue.rs`), and publishes on the release channel, where
/// observers (leader watches) and Redlock's waiters listen. Returns 1 when it held —
/// 2 in the plain layout when the release message reached a listener (`courtesy.rs`).
///
/// With another holder or none, the owner is a waiter that stops waiting: it leaves
/// the queue (and a lock found free while others queue goes to the head). Returns 0.
///
/// The fencing counter of a name nobody takes next expires after the retention (plus
/// however far it runs ahead of the server clock), unless a new holder takes the name
/// first (its `SET` clears the expiry): a name nobody uses leaves no key behind. Its
/// next token is at least the server clock, so above every token the counter gave as
/// long as the clock does not step back by more than the retention. A crashed holder's
/// counter, never released, keeps no expiry.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    // with nobody queued, done before the queue's functions are even defined
    Script::new(&format!(
        "{}{QUEUE_LUA}{HAND_OVER}{}",
        r"
local QK, WK, CH, PUB = KEYS[3], KEYS[4], ARGV[2], ARGV[4]
local queued = ARGV[5] == '1' and redis.call('EXISTS', QK) == 1
local holder = redis.call('GET', KEYS[1])
-- the fencing counter of a name no one holds now expires after the retention
local function retain()
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if c > 0 then
    local now = redis.call('TIME')
    local ahead = c - (tonumber(now[1]) * 1000000 + tonumber(now[2]))
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + math.max(0, math.ceil(ahead / 1000)))
  end
end
if not queued then
  if holder ~= ARGV[1] then return 0 end
  redis.call('DEL', KEYS[1])
  retain()
  -- pcall: the release is done; a publish refused (no SPUBLISH before Redis 7, an ACL
  -- without it) must not report it failed — waiters then find out by polling
  local heard = redis.pcall(PUB, CH, 'released')
  if type(heard) == 'number' and heard > 0 then return 2 end
  return 1
end
",
        r"
local now, us = q_clock()
if holder ~= ARGV[1] then
  q_leave(ARGV[1])
  if not holder then hand_over(now, us, ARGV[1]) end
  return 0
end
redis.call('DEL', KEYS[1])
if not hand_over(now, us, ARGV[1]) then retain() end
redis.pcall(PUB, CH, 'released')
return 1
"
    ))
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

/// KEYS: lock. ARGV: owner, revoked mark. While `owner` holds the lock, its value
/// becomes the mark with the time it has left (`PTTL`, then `SET … PX`: no `KEEPTTL`
/// before Redis 6): renewals and releases compare the owner id, so they all refuse it
/// from then on, and the key keeps the name taken until it expires. 1 if revoked, 0
/// if `owner` does not hold it, -1 for a key without an expiry (no lease of ours).
pub(crate) static REVOKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left == -1 then return -1 end
if left <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', left)
return 1
",
    )
});

/// KEYS: lock, fence. Returns `{owner, pttl, token}` (`false` owner when free): one
/// round trip for `inspect`. (Not the value key: a script declaring a key that does
/// not exist is refused with TRYAGAIN while its slot migrates; `inspect` reads it
/// beside the script.)
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
",
    )
});

#[cfg(all(test, feature = "server-tests"))]
mod redis_server_tests;
