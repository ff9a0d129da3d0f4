-- fixed_window: mark(ARGV, now) and adjust(KEYS, ARGV, now, delta, mark)
-- for reservations (lua/reserve.lua). mark is the window charged; adjust
-- takes delta units more (delta < 0 gives −delta back): an excess into
-- the window of now, at most one quota past it; a refund into the window
-- charged, if the state still holds it, never below 0.
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
    if w == charged then
      redis.call('HSET', KEYS[1], 'n', math.max(n + delta, 0))
    end
    return
  end
  local ws, we = window(ARGV, now)
  if w ~= ws then n = 0 end
  redis.call('HSET', KEYS[1], 'w', ws, 'n', math.min(n + delta, 2 * rate))
  redis.call('PEXPIRE', KEYS[1], math.ceil((we - now) / 1000))
end
