//! FIFO hand-off on one Redis server: waiters queue on the server, and a release grants
//! the lock to the oldest live one and tells it alone.
//!
//! Two keys beside a lock's (or a semaphore's, or a read-write lock's), under its hash
//! tag: `…:queue`, the waiting owner ids oldest first, and `…:waiters`, a hash of owner
//! id → `"<deadline ms> <ttl ms> <kind> <permits> <listens>"`. A waiter joins with its
//! first attempt that waits and every later attempt moves its deadline to the server
//! clock plus its liveness window (three of the longest gaps between its attempts when
//! it listens on its channel, ten polling gaps when it polls); both keys expire with
//! the longest window, so waiters that all died leave nothing behind. (A semaphore
//! waiter refused for asking another count leaves instead, and joins again when it
//! asks again.)
//!
//! The release — or any attempt that finds the lock free while others queue (a crashed
//! holder's lease ran out) — hands the lock to the head, skipping heads past their
//! deadline: it writes the head as the holder with the head's TTL and the next token,
//! and publishes that token on the head's own channel (`<release channel>:<owner id>`).
//! One message per hand-off, whatever the number of waiters; the others send nothing.
//! A new attempt never passes a live queue (`try_acquire` included), so the order is
//! the order of arrival, as on etcd and ZooKeeper.
//!
//! The waiter takes the message as the grant, without a second attempt (`dlock_core::backend::grants`):
//! its lease counts from the send time of its last attempt the server answered
//! "queued" — the grant came after the server ran that attempt — and a token not above
//! the counter that answer carried is an older grant, not this one.
//!
//! A waiter that stops waiting — its wait ran out, it failed, its future was dropped —
//! leaves the queue (`ClaimDriver::abandon` runs the release, which also hands on a
//! grant the waiter never heard of). One that was killed
//! is skipped at once: its connection closed, so its channel has no subscriber left
//! (`PUBSUB NUMSUB`, checked for waiters that said they listen). One cut off from the
//! server with its connection still open there is skipped once its deadline passes; a
//! grant made to it before then is held until its TTL, like a crashed holder's lease.

/// The queue's Lua functions, for a script that defines `QK` and `WK` (the queue and
/// waiters keys), `CH` (the release channel) and `PUB` (`PUBLISH`, or `SPUBLISH` on a
/// cluster) before them.
///
/// - `q_clock()` → server time in ms and µs;
/// - `q_join(owner, now, mode, live, ttl, kind, permits)` → joins (or stays, with a new
///   deadline `now + live`); `mode` 2 says the waiter listens on its channel already;
/// - `q_leave(owner)` → leaves, if queued;
/// - `q_head(now)` → the oldest live waiter, with its ttl, kind and permits (`nil`
///   when none), dropping the dead ones ahead of it: past their deadline, or listening
///   no more — a waiter that listened and has no subscriber left on its channel lost
///   its connection (a killed process: the server saw the socket close), so a grant
///   would reach no one;
/// - `q_pop(owner)` → removes the head (`owner`, as `q_head` named it);
/// - `q_tell(owner, token)` → the grant message to `owner`.
pub(crate) const QUEUE_LUA: &str = r"
local function q_clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
    tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function q_join(owner, now, mode, live, ttl, kind, permits)
  local listens = mode == '2' and 1 or 0
  local entry = string.format('%d %d %s %d %d', now + live, ttl, kind, permits, listens)
  if redis.call('HSET', WK, owner, entry) == 1 then redis.call('RPUSH', QK, owner) end
  -- the keys outlive every entry: extended, never shortened by a shorter window
  for _, k in ipairs({QK, WK}) do
    if redis.call('PTTL', k) < live then redis.call('PEXPIRE', k, live) end
  end
end
local function q_leave(owner)
  if redis.call('HDEL', WK, owner) == 1 then redis.call('LREM', QK, 1, owner) end
end
local function q_listening(owner)
  local numsub = PUB == 'SPUBLISH' and 'SHARDNUMSUB' or 'NUMSUB'
  local n = redis.pcall('PUBSUB', numsub, CH .. ':' .. owner)
  -- an answer it cannot read (an ACL without PUBSUB) counts as listening
  return type(n) ~= 'table' or tonumber(n[2]) ~= 0
end
local function q_head(now)
  while true do
    local head = redis.call('LINDEX', QK, 0)
    if not head then return nil end
    local entry = redis.call('HGET', WK, head)
    if entry then
      local d, ttl, kind, permits, listens =
        string.match(entry, '^(%d+) (%d+) (%a) (%d+) (%d)$')
      if d and tonumber(d) >= now and (listens == '0' or q_listening(head)) then
        return head, tonumber(ttl), kind, tonumber(permits)
      end
      redis.call('HDEL', WK, head)
    end
    redis.call('LPOP', QK)
  end
end
local function q_pop(owner)
  redis.call('LPOP', QK)
  redis.call('HDEL', WK, owner)
end
local function q_tell(owner, token)
  -- pcall: the grant stands; a refused publish only leaves the waiter to find it
  -- with its next attempt
  redis.pcall(PUB, CH .. ':' .. owner, string.format('%d', token))
end
";

/// How an attempt of a caller that will wait joins the queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Queueing {
    /// How long its entry lives without another attempt (the liveness window).
    pub live: std::time::Duration,
    /// It listens on its own channel already (`q_head` may then check that it does).
    pub listening: bool,
}

impl Queueing {
    /// The scripts' `waits` argument: 0 no, 1 yes, 2 yes and listening.
    pub(crate) fn mode(queueing: Option<Self>) -> u8 {
        match queueing {
            None => 0,
            Some(q) if q.listening => 2,
            Some(_) => 1,
        }
    }

    /// The scripts' liveness argument, in ms (0 when it does not wait).
    pub(crate) fn live_ms(queueing: Option<Self>) -> u64 {
        queueing.map_or(0, |q| dlock_core::backend::millis_u64(q.live))
    }
}
