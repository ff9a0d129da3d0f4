-- fixed_window's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/fixed_window.go.
--- decide
-- fixed_window: the body of decide_values(KEYS, ARGV, now, cost, peek), one
-- decision made atomically at now (µs, Redis's clock); with peek it writes
-- nothing and answers with the state as it is.
-- KEYS[1]  hash {w = window start (µs), n = units admitted in that window,
--          x = when the key expires (µs): the window's end, written with
--          w, so that a decision finding both as its own window's (the
--          period may have changed live) has no expiry to set};
--          across regions (regions set, see region/lua/slots.lua) the
--          key's slots "w:n", one per writer, summed over this window's
-- ARGV     rate, period (µs), window offset (µs), calendar window starts
--          (µs: before the caller's, the caller's, next, after; 0 without
--          a calendar), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs);
--          across regions then over the hybrid threshold (1/0), strict for (µs), the written slot
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])
local cprev = tonumber(ARGV[4])
local cstart = tonumber(ARGV[5])
local cnext = tonumber(ARGV[6])
local cafter = tonumber(ARGV[7])

local ws, reset
if cstart == 0 then
  -- fmod is exact; (now - offset) / period in floating point need not be.
  ws = now - math.fmod(now - offset, period)
  reset = ws + period - now
else
  -- A calendar's windows: Lua has no time zone rules, so the caller
  -- found the starts in Go's around its own clock; the one holding
  -- Redis's clock counts, so that callers whose clocks differ by less
  -- than a window share one count.
  local we
  if now < cprev or now >= cafter then
    error(string.format('calendar windows from %.0f to %.0f do not hold Redis TIME %.0f: the calling clock is more than a window off', cprev, cafter, now))
  elseif now < cstart then
    ws, we = cprev, cstart
  elseif now < cnext then
    ws, we = cstart, cnext
  else
    ws, we = cnext, cafter
  end
  reset = we - now
end
local expires = now + reset

local count, mine, kept = 0, 0, false
if regions then
  for name, s in pairs(regions.read(KEYS[1])) do
    if s[1] == ws then
      count = count + (s[2] or 0)
      if name == regions.me then mine = s[2] or 0 end
    end
  end
  if regions.threshold >= 0 and count + cost > regions.threshold then
    return 0, math.max(rate - count, 0), reset, 0, 0, 1, reset, ''
  end
else
  local state = redis.call('HMGET', KEYS[1], 'w', 'n', 'x')
  if tonumber(state[1]) == ws then
    count = tonumber(state[2]) or 0
    kept = tonumber(state[3]) == expires
  end
end

if count + cost > rate then
  return 0, math.max(rate - count, 0), reset, reset, 0, regions and 0, reset, ''
end
if peek then
  return cost, rate - count, reset, 0, 0, regions and 0, reset, ''
end
count = count + cost
-- Once the window has passed the state is that of a fresh key.
if regions then
  local slot = regions.int(ws) .. ':' .. regions.int(mine + cost)
  regions.save_slot(KEYS[1], slot, math.ceil(reset / 1000))
  return cost, rate - count, reset, 0, 0, 0, reset, slot
end
if kept then
  -- The write that set w and x set this expiry; any other leaves it.
  redis.call('HSET', KEYS[1], 'n', count)
else
  redis.call('HSET', KEYS[1], 'w', ws, 'n', count, 'x', expires)
  redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000))
end
return cost, rate - count, reset, 0, 0
--- settle
-- fixed_window: mark(ARGV, now) and adjust(KEYS, ARGV, now, delta, mark)
-- for reservations (lua/reserve.lua). mark is the window charged; adjust
-- takes delta units more (delta < 0 gives −delta back): an excess into
-- the window of now, at most one quota past it; a refund into the window
-- charged, if the state still holds it, never below 0 (at 0 the key is
-- deleted).
-- window is fixed_window.lua's choice of window: a calendar's starts
-- (ARGV[4..7], 0 without one) or multiples of the period from the offset.
local function window(ARGV, now)
  local cstart = tonumber(ARGV[5])
  if cstart == 0 then
    local period = tonumber(ARGV[2])
    local ws = now - math.fmod(now - tonumber(ARGV[3]), period)
    return ws, ws + period
  end
  local cnext = tonumber(ARGV[6])
  if now < cstart then
    return tonumber(ARGV[4]), cstart
  elseif now < cnext then
    return cstart, cnext
  end
  return cnext, tonumber(ARGV[7])
end
local function mark(ARGV, now)
  local ws = window(ARGV, now)
  return ws
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate = tonumber(ARGV[1])
  local state = redis.call('HMGET', KEYS[1], 'w', 'n')
  local w, n = tonumber(state[1]), tonumber(state[2]) or 0
  if delta < 0 then
    if w == charged and n + delta > 0 then
      redis.call('HSET', KEYS[1], 'n', n + delta)
    elseif w == charged then
      -- None left counted: the state of a fresh key, which a set's
      -- give-back leaves as it found it.
      redis.call('DEL', KEYS[1])
    end
    return
  end
  local ws, we = window(ARGV, now)
  if w ~= ws then n = 0 end
  redis.call('HSET', KEYS[1], 'w', ws, 'n', math.min(n + delta, 2 * rate), 'x', we)
  redis.call('PEXPIRE', KEYS[1], math.ceil((we - now) / 1000))
end
