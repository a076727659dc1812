//! The Lua scripts of semaphores and read-write locks (keys: see the parent module),
//! each one round trip and atomic on the server.

use std::sync::LazyLock;

use redis::Script;

use crate::queue::QUEUE_LUA;

/// Drops expired holders (and their tokens, and a writer mark they carry) and lapsed
/// intents; sets `now` (ms) and `us` (µs) from the server clock. Shared by the scripts.
const PURGE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, m in ipairs(gone) do
  redis.call('HDEL', KEYS[2], m)
  if redis.call('HGET', KEYS[3], 'writer') == m then redis.call('HDEL', KEYS[3], 'writer') end
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
";

/// What a name's keys keep, after a script changed its holders (defined after
/// [`PURGE`], whose `now` and `us` it reads): while anyone holds it, the holder set,
/// tokens and count live as long as the last lease (a crashed holder's keys go with
/// it) and the intents as long as the last intent; with nobody left the count and
/// writer mark go at once and the fencing counter `retention` ms later (plus however
/// far it runs ahead of the server clock), as the mutex's — unless a holder comes first
/// (its `SET` clears the expiry). `retention` nil: the counter is left as it is.
const TIDY: &str = r"
local function tidy(retention)
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    local left = math.max(1, tonumber(last[2]) - now) + 1000
    for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], left) end
  else
    redis.call('DEL', KEYS[2], KEYS[3])
    local c = tonumber(redis.call('GET', KEYS[5]) or '0')
    if retention and c > 0 then
      local ahead = math.max(0, math.ceil((c - us) / 1000))
      redis.call('PEXPIRE', KEYS[5], tonumber(retention) + ahead)
    end
  end
  local intent = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  if intent[2] then
    redis.call('PEXPIRE', KEYS[4], math.max(1, tonumber(intent[2]) - now) + 1000)
  end
end
";

/// Admission (Lua), after [`PURGE`], [`TIDY`] and the queue functions:
/// - `fits(kind, n)` → whether one more holder of `kind` (`n` permits) fits beside the
///   holders now; `false, count in use` for a semaphore held under another count;
/// - `admit(owner, ttl, kind, n)` → makes it a holder at the next token (the hybrid
///   clock, as the mutex's), a writer's intent gone; the token;
/// - `serve(caller)` → admits queued waiters, oldest first, while the oldest fits, and
///   tells each but `caller`; the caller's token if it was admitted. A semaphore waiter
///   that asks another count than the holders' is dropped from the queue.
const ADMIT: &str = r"
local function fits(kind, n)
  local count = redis.call('ZCARD', KEYS[1])
  if kind == 'p' then
    local used = tonumber(redis.call('HGET', KEYS[3], 'permits') or n)
    if count > 0 and used ~= n then return false, used end
    return count < n
  elseif kind == 'r' then
    return not redis.call('HGET', KEYS[3], 'writer')
  end
  return count == 0
end
local function admit(owner, ttl, kind, n)
  local m = kind .. ':' .. owner
  local c = tonumber(redis.call('GET', KEYS[5]) or '0')
  local token = us
  if c >= token then token = c + 1 end
  redis.call('SET', KEYS[5], string.format('%d', token))
  redis.call('ZADD', KEYS[1], now + ttl, m)
  redis.call('HSET', KEYS[2], m, string.format('%d', token))
  if kind == 'p' then redis.call('HSET', KEYS[3], 'permits', n) end
  if kind == 'w' then
    redis.call('HSET', KEYS[3], 'writer', m)
    redis.call('ZREM', KEYS[4], owner)
  end
  return token
end
local function serve(caller)
  local mine
  while true do
    local head, ttl, kind, n = q_head(now)
    if not head then return mine end
    local ok, used = fits(kind, n)
    if not ok and not used then return mine end
    q_pop(head)
    -- (one that asks another count than the holders' is dropped: refused when it asks
    -- again, it joins again once the name is idle, and keeps no one behind it out)
    if ok then
      local token = admit(head, ttl, kind, n)
      if head == caller then mine = token else q_tell(head, token) end
    end
  end
end
";

/// A shared script: the purge, the tidy-up, the queue and admission, then `body`;
/// `channel` and `publish` name the ARGV that carry the release channel and the
/// publish command (`0`: the script publishes nothing).
fn shared_script(channel: u8, publish: u8, body: &str) -> Script {
    Script::new(&format!(
        "{PURGE}{TIDY}local QK, WK, CH, PUB = KEYS[6], KEYS[7], ARGV[{channel}], ARGV[{publish}]\n\
         {QUEUE_LUA}{ADMIT}{body}"
    ))
}

/// KEYS: holders, tokens, meta, intent, fence, queue, waiters. ARGV: member, ttl ms,
/// kind (`p`, `r`, `w`), permits, waits (0: no, 1: yes, 2: yes and listening on its
/// channel already), owner, liveness ms, release channel, `PUBLISH` (`SPUBLISH` on a
/// cluster). Returns `{1, token, 0}` when taken (or already ours: an earlier attempt of
/// this acquisition committed late, or a release admitted us while we queued — same
/// token), `{0, ms until the earliest holder lapses, counter}` when not (a caller that
/// waits is queued), `{2, permits in use, 0}` for a semaphore held with another count.
///
/// With others queued it is never taken past them: a reader behind a waiting writer
/// waits, so writers do not starve. (Earlier versions kept writers' intents in the
/// intent set instead; a live one still keeps new readers out.)
pub(super) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    shared_script(
        8,
        9,
        r"
local ttl, kind, n, owner = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[6]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  q_leave(owner)
  tidy(nil)
  return {1, tonumber(redis.call('HGET', KEYS[2], ARGV[1])), 0}
end
if kind == 'p' then
  local _, used = fits(kind, n)
  if used then
    q_leave(owner)
    tidy(nil)
    return {2, used, 0}
  end
end
if redis.call('EXISTS', QK) == 1 then
  local mine = serve(owner)
  if mine then
    tidy(nil)
    return {1, mine, 0}
  end
end
local ok = redis.call('EXISTS', QK) == 0 and fits(kind, n)
if ok and kind == 'r' then ok = redis.call('ZCARD', KEYS[4]) == 0 end
if ok then
  local token = admit(owner, ttl, kind, n)
  tidy(nil)
  return {1, token, 0}
end
if ARGV[5] ~= '0' then q_join(owner, now, ARGV[5], tonumber(ARGV[7]), ttl, kind, n) end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local intent = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
local soonest = first[2] and tonumber(first[2]) or nil
if intent[2] and (not soonest or tonumber(intent[2]) < soonest) then soonest = tonumber(intent[2]) end
tidy(nil)
return {0, soonest and (soonest - now) or 0, tonumber(redis.call('GET', KEYS[5]) or '0')}
",
    )
});

/// KEYS: as [`RELEASE`]. ARGV: member, token, ttl ms. Extends an
/// unexpired holder with this token; 1 or 0.
pub(super) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    shared_script(
        0,
        0,
        r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  tidy(nil)
  return 1
end
return 0
",
    )
});

/// KEYS: holders, tokens, meta, intent, fence, queue, waiters. ARGV: member, token,
/// release channel, `PUBLISH` (`SPUBLISH` on a cluster), counter retention ms. Removes
/// an unexpired holder with this token, admits the queued waiters that now fit, and
/// publishes on the release channel; 1 or 0.
pub(super) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    shared_script(
        3,
        4,
        r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  if redis.call('HGET', KEYS[3], 'writer') == ARGV[1] then redis.call('HDEL', KEYS[3], 'writer') end
  serve('')
  tidy(ARGV[5])
  -- pcall: released already; a refused publish only leaves waiters to poll
  redis.pcall(ARGV[4], ARGV[3], 'released')
  return 1
end
return 0
",
    )
});

/// KEYS: as [`RELEASE`]. ARGV: member, owner, release channel, `PUBLISH`, counter
/// retention ms. A waiter that stops waiting: leaves the queue, drops its writer's
/// intent, and gives back a hold a release granted it that it never heard of; then
/// admits whoever fits now.
pub(super) static LEAVE: LazyLock<Script> = LazyLock::new(|| {
    shared_script(
        3,
        4,
        r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  if redis.call('HGET', KEYS[3], 'writer') == ARGV[1] then redis.call('HDEL', KEYS[3], 'writer') end
else
  q_leave(ARGV[2])
end
redis.call('ZREM', KEYS[4], ARGV[2])
serve('')
tidy(ARGV[5])
return 1
",
    )
});

/// KEYS: as [`RELEASE`]. Returns `{permits, member, ms left,
/// token, …}`: the count the holders use, then every unexpired holder.
pub(super) static HOLDERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PURGE}{}",
        r"
local out = {tonumber(redis.call('HGET', KEYS[3], 'permits') or '0')}
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = tonumber(all[i + 1]) - now
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[2], all[i]))
end
return out
"
    ))
});
