-- Where a Redis lock cycle's server time goes (BENCHMARKS.md, "Redis parallel: where
-- the server's time goes"). Runs, inside one script, ARGV[2] acquire + release cycles
-- over 64 names (as `dlock bench`'s parallel scenario) and returns the µs per cycle:
--
--   redis-cli -p PORT --eval scripts/bench-redis-script-parts.lua , VARIANT 50000
--
-- on a scratch server (it writes keys L0..L63, F0..F63). VARIANT: `floor` (the bench
-- floor's calls: SET NX PX, INCR; GET, DEL, PUBLISH), `dlock` (the calls ACQUIRE and
-- RELEASE in dlock-redis/src/scripts.rs make with nobody queued), or `dlock` with
-- parts left out: `_noqueue` (the FIFO queue's EXISTS), `_notime` (the hybrid clock's
-- TIME), `_noretain` (the counter's retention at release), e.g. `dlock_noqueue_notime`.
-- The per-call cost of EVALSHA itself (its keys and arguments) is not in here.
local n, variant = tonumber(ARGV[2]), ARGV[1]
local function us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local names = {}
for j = 0, 63 do names[j] = {'L' .. j, 'F' .. j, 'Q' .. j, 'owner-' .. j} end
local queue, clock, retain =
  not variant:find('noqueue'), not variant:find('notime'), not variant:find('noretain')
local started = us()
for i = 1, n do
  local k, f, q, owner = unpack(names[i % 64])
  if variant == 'floor' then
    redis.call('SET', k, owner, 'NX', 'PX', 30000)
    redis.call('INCR', f)
    if redis.call('GET', k) == owner then redis.call('DEL', k) end
    redis.call('PUBLISH', 'C', 'released')
  else
    -- acquire: nobody queued, the lock free
    if not queue or redis.call('EXISTS', q) == 0 then
      redis.call('SET', k, owner, 'NX', 'PX', 30000, 'GET')
      local t = 1733000000000000 + i
      if clock then
        local now = redis.call('TIME')
        t = tonumber(now[1]) * 1000000 + tonumber(now[2])
      end
      local c = tonumber(redis.call('GET', f) or '0')
      if c >= t then t = c + 1 end
      redis.call('SET', f, string.format('%d', t))
    end
    -- release: nobody queued, the lock ours
    if queue then redis.call('EXISTS', q) end
    if redis.call('GET', k) == owner then redis.call('DEL', k) end
    if retain then
      local c = tonumber(redis.call('GET', f) or '0')
      local ahead = 0
      if clock then
        local now = redis.call('TIME')
        ahead = c - (tonumber(now[1]) * 1000000 + tonumber(now[2]))
      end
      redis.call('PEXPIRE', f, 604800000 + math.max(0, math.ceil(ahead / 1000)))
    end
    redis.pcall('PUBLISH', 'C', 'released')
  end
end
return string.format('%.3f', (us() - started) / n)
