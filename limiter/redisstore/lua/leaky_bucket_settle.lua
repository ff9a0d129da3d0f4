-- leaky_bucket: mark and adjust for reservations. The queue, drained to
-- now, moves by delta units: down to empty on a refund, up to two buckets
-- on an excess. A missing key is empty: a refund does nothing.
local function mark(ARGV, now)
  return 0
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local full = burst * period
  local state = redis.call('HMGET', KEYS[1], 'l', 't')
  local level, at = tonumber(state[1]), tonumber(state[2])
  if not (level and at) then
    if delta < 0 then return end
    level = 0
  else
    local elapsed = math.min(math.max(now - at, 0), ceildiv(level, rate))
    level = math.max(0, level - elapsed * rate)
  end
  level = math.min(math.max(level + delta * period, 0), 2 * full)
  if level <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(ceildiv(level, rate) / 1000))
end
