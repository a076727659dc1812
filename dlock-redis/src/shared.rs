//! Semaphores and read-write locks on one Redis server: a holder set per name, each
//! operation one script.
//!
//! Keys, all under the name's hash tag (one Cluster slot), in a space of their own
//! (`sem` for semaphores, `rw` for read-write locks), so a mutex, a semaphore and a
//! read-write lock of one name never meet:
//! - `PREFIX{name}:<space>` — sorted set of holders, member `<access tag>:<owner>`,
//!   score the lease's expiry in server milliseconds;
//! - `…:<space>:tokens` — hash member → fencing token;
//! - `…:<space>:meta` — hash: `permits` (the count the holders use), `writer` (the
//!   member of the writer holding the lock);
//! - `…:<space>:intent` — sorted set of waiting writers' owner ids, score when the
//!   intent lapses: while one is live, new readers are refused (writers do not starve);
//! - `…:<space>:fence` — the fencing counter (hybrid clock, as the mutex's); it expires
//!   a counter retention after the last holder released, as the mutex's;
//! - `…:<space>:released` — the channel a release publishes on.
//!
//! The holder set, tokens, count and intents expire with the last lease or intent in
//! them, so a name whose holders crashed leaves only its counter behind (see `TIDY`).

use std::sync::LazyLock;
use std::time::Duration;

use dlock_core::backend::{Claim, millis_u64};
use dlock_core::{Access, FencingToken, Holding, LockError, LockName, OwnerId};
use redis::Script;

use crate::keys::escape;
use crate::node::Node;

/// The keys of one semaphore or read-write lock.
#[derive(Clone, Debug)]
pub(crate) struct SharedKeys {
    holders: String,
    tokens: String,
    meta: String,
    intent: String,
    fence: String,
    pub channel: String,
}

impl SharedKeys {
    pub(crate) fn new(prefix: &str, name: &LockName, access: Access) -> Self {
        let space = if access.is_rw() { "rw" } else { "sem" };
        let base = format!("{prefix}{{{}}}:{space}", escape(name.as_str()));
        Self {
            tokens: format!("{base}:tokens"),
            meta: format!("{base}:meta"),
            intent: format!("{base}:intent"),
            fence: format!("{base}:fence"),
            channel: format!("{base}:released"),
            holders: base,
        }
    }

    fn all(&self) -> [&str; 5] {
        [
            &self.holders,
            &self.tokens,
            &self.meta,
            &self.intent,
            &self.fence,
        ]
    }
}

/// A holder's member in the holder set: its access and owner id.
fn member(access: Access, owner: &str) -> String {
    let tag = match access {
        Access::Write => "w",
        Access::Read => "r",
        _ => "p",
    };
    format!("{tag}:{owner}")
}

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

/// KEYS: holders, tokens, meta, intent, fence. ARGV: member, ttl ms, kind (`p`, `r`,
/// `w`), permits, waits (0/1), intent ms, owner. Returns `{1, token}` when taken (or
/// already ours: an earlier attempt of this acquisition committed late — same token),
/// `{0, ms until the earliest holder or intent lapses}` when not, `{2, permits in use}`
/// for a semaphore held with another count.
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PURGE}{TIDY}{}",
        r"
local ttl = tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  tidy(nil)
  return {1, tonumber(redis.call('HGET', KEYS[2], ARGV[1]))}
end
local kind, count = ARGV[3], redis.call('ZCARD', KEYS[1])
local ok
if kind == 'p' then
  local n = tonumber(ARGV[4])
  local used = tonumber(redis.call('HGET', KEYS[3], 'permits') or ARGV[4])
  if count > 0 and used ~= n then return {2, used} end
  ok = count < n
elseif kind == 'r' then
  ok = not redis.call('HGET', KEYS[3], 'writer') and redis.call('ZCARD', KEYS[4]) == 0
else
  ok = count == 0
end
if not ok then
  if kind == 'w' and ARGV[5] == '1' then
    redis.call('ZADD', KEYS[4], now + tonumber(ARGV[6]), ARGV[7])
  end
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local intent = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  local soonest = first[2] and tonumber(first[2]) or nil
  if intent[2] and (not soonest or tonumber(intent[2]) < soonest) then soonest = tonumber(intent[2]) end
  tidy(nil)
  return {0, soonest and (soonest - now) or 0}
end
local c = tonumber(redis.call('GET', KEYS[5]) or '0')
local token = us
if c >= token then token = c + 1 end
redis.call('SET', KEYS[5], string.format('%d', token))
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', token))
if kind == 'p' then redis.call('HSET', KEYS[3], 'permits', ARGV[4]) end
if kind == 'w' then
  redis.call('HSET', KEYS[3], 'writer', ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[7])
end
tidy(nil)
return {1, token}
"
    ))
});

/// KEYS: holders, tokens, meta, intent, fence. ARGV: member, token, ttl ms. Extends an
/// unexpired holder with this token; 1 or 0.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PURGE}{TIDY}{}",
        r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  tidy(nil)
  return 1
end
return 0
"
    ))
});

/// KEYS: holders, tokens, meta, intent, fence. ARGV: member, token, channel, `PUBLISH`
/// (`SPUBLISH` on a cluster), counter retention ms. Removes an unexpired holder with
/// this token and wakes waiters; 1 or 0.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PURGE}{TIDY}{}",
        r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  if redis.call('HGET', KEYS[3], 'writer') == ARGV[1] then redis.call('HDEL', KEYS[3], 'writer') end
  tidy(ARGV[5])
  -- pcall: released already; a refused publish only leaves waiters to poll
  redis.pcall(ARGV[4], ARGV[3], 'released')
  return 1
end
return 0
"
    ))
});

/// KEYS: holders, tokens, meta, intent, fence. Returns `{permits, member, ms left,
/// token, …}`: the count the holders use, then every unexpired holder.
static HOLDERS: LazyLock<Script> = LazyLock::new(|| {
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

/// One attempt to take a semaphore's permit, a read or the write lease.
pub(crate) struct SharedAttempt<'a> {
    pub name: &'a LockName,
    pub access: Access,
    pub owner: &'a str,
    pub ttl: Duration,
    /// The caller waits if this fails (a writer then leaves its intent).
    pub waits: bool,
    /// How long a waiting writer's intent lasts.
    pub intent: Duration,
}

impl Node {
    /// One attempt to take `a.name` with `a.access` for `a.owner`.
    pub(crate) async fn claim_shared(
        &self,
        keys: &SharedKeys,
        a: &SharedAttempt<'_>,
    ) -> Result<Claim, LockError> {
        let SharedAttempt {
            name,
            access,
            owner,
            ttl,
            waits,
            intent,
        } = *a;
        let (kind, permits) = match access {
            Access::Permit(n) => ("p", n),
            Access::Read => ("r", 0),
            _ => ("w", 0),
        };
        let mut call = ACQUIRE.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(millis_u64(ttl))
            .arg(kind)
            .arg(permits)
            .arg(u8::from(waits))
            .arg(millis_u64(intent))
            .arg(owner);
        let (status, n): (i64, i64) = self.invoke("acquire", call).await?;
        match status {
            1 => Ok(Claim::Taken(FencingToken::from_signed(
                n,
                "fencing counter",
            )?)),
            2 => Err(LockError::permits_mismatch(
                name,
                u32::try_from(n).unwrap_or(0),
                permits,
            )),
            _ => Ok(Claim::Held(
                u64::try_from(n).ok().map(Duration::from_millis),
            )),
        }
    }

    /// Extends a holder's lease; whether it was still held.
    pub(crate) async fn renew_shared(
        &self,
        keys: &SharedKeys,
        access: Access,
        owner: &str,
        token: FencingToken,
        ttl: Duration,
    ) -> Result<bool, LockError> {
        let mut call = RENEW.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(token.get())
            .arg(millis_u64(ttl));
        Ok(self.invoke::<i64>("renew", call).await? == 1)
    }

    /// Gives a holder's lease back; whether it was still held.
    pub(crate) async fn release_shared(
        &self,
        keys: &SharedKeys,
        access: Access,
        owner: &str,
        token: FencingToken,
    ) -> Result<bool, LockError> {
        let mut call = RELEASE.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        call.arg(member(access, owner))
            .arg(token.get())
            .arg(&keys.channel)
            .arg(self.conn.publish_command())
            .arg(millis_u64(self.counter_retention));
        Ok(self.invoke::<i64>("release", call).await? == 1)
    }

    /// The unexpired holders, oldest grant first.
    pub(crate) async fn holders(&self, keys: &SharedKeys) -> Result<Vec<Holding>, LockError> {
        let mut call = HOLDERS.prepare_invoke();
        for k in keys.all() {
            call.key(k);
        }
        let flat: Vec<redis::Value> = self.invoke("holders", call).await?;
        let Some((permits, flat)) = flat.split_first() else {
            return Ok(Vec::new());
        };
        let permits: u32 = redis::from_redis_value(permits.clone())
            .map_err(|e| LockError::backend("the permit count", e))?;
        let mut out = Vec::new();
        for chunk in flat.chunks_exact(3) {
            let member: String = redis::from_redis_value(chunk[0].clone())
                .map_err(|e| LockError::backend("a holder's member", e))?;
            let left: i64 = redis::from_redis_value(chunk[1].clone())
                .map_err(|e| LockError::backend("a holder's expiry", e))?;
            let token: i64 = redis::from_redis_value(chunk[2].clone())
                .map_err(|e| LockError::backend("a holder's token", e))?;
            let (tag, owner) = member.split_once(':').unwrap_or(("p", &member));
            let access = match tag {
                "w" => Access::Write,
                "r" => Access::Read,
                _ => Access::Permit(permits),
            };
            out.push(Holding::new(
                access,
                OwnerId::from_stored(owner),
                FencingToken::from_signed(token, "a holder's token")?,
                Duration::from_millis(u64::try_from(left).unwrap_or(0)),
            ));
        }
        out.sort_by_key(|h| h.token);
        Ok(out)
    }
}
