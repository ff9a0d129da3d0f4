-- gcra: mark and adjust for reservations. The TAT moves by delta emission
-- intervals: back to now at most on a refund, ahead of now by two
-- tolerances at most on an excess.
local function mark(ARGV, now)
  return 0
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local interval = period / rate
  local tat = tonumber(redis.call('GET', KEYS[1]))
  local ahead = 0
  if tat then ahead = math.max(tat - now, 0) end
  ahead = math.min(math.max(ahead + delta * interval, 0), 2 * burst * interval)
  local ms = math.ceil(ahead / 1000)
  if ms <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('SET', KEYS[1], now + ahead, 'PX', ms)
end
