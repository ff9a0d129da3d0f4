-- sliding_window: mark and adjust for reservations, as fixed_window's. A
-- refund goes into the window charged: this window's count, or, once the
-- state has moved on one window, the previous count it weighs.
local function mark(ARGV, now)
  return now - math.fmod(now - tonumber(ARGV[3]), tonumber(ARGV[2]))
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
  local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
  local w, c, p = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
  if delta < 0 then
    if w == charged then
      redis.call('HSET', KEYS[1], 'c', math.max(c + delta, 0))
    elseif w == charged + period then
      redis.call('HSET', KEYS[1], 'p', math.max(p + delta, 0))
    end
    return
  end
  local ws = mark(ARGV, now)
  if w == ws - period then
    c, p = 0, c
  elseif w ~= ws then
    c, p = 0, 0
  end
  redis.call('HSET', KEYS[1], 'w', ws, 'c', math.min(c + delta, 2 * rate), 'p', p)
  redis.call('PEXPIRE', KEYS[1], math.ceil((ws + 2 * period - now) / 1000))
end
