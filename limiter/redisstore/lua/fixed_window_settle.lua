-- fixed_window: mark(ARGV, now) and adjust(KEYS, ARGV, now, delta, mark)
-- for reservations (lua/reserve.lua). mark is the window charged; adjust
-- takes delta units more (delta < 0 gives −delta back): an excess into
-- the window of now, at most one quota past it; a refund into the window
-- charged, if the state still holds it, never below 0.
local function mark(ARGV, now)
  return now - math.fmod(now - tonumber(ARGV[3]), tonumber(ARGV[2]))
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
  local state = redis.call('HMGET', KEYS[1], 'w', 'n')
  local w, n = tonumber(state[1]), tonumber(state[2]) or 0
  if delta < 0 then
    if w == charged then
      redis.call('HSET', KEYS[1], 'n', math.max(n + delta, 0))
    end
    return
  end
  local ws = mark(ARGV, now)
  if w ~= ws then n = 0 end
  redis.call('HSET', KEYS[1], 'w', ws, 'n', math.min(n + delta, 2 * rate))
  redis.call('PEXPIRE', KEYS[1], math.ceil((ws + period - now) / 1000))
end
