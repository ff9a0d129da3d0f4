-- token_bucket: mark and adjust for reservations. The level, refilled to
-- now, moves by delta tokens: up to a full bucket on a refund, down to one
-- bucket of debt on an excess. A missing key is full: a refund does nothing.
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
    level = full
  elseif level < full then
    local elapsed = math.min(math.max(now - at, 0), ceildiv(full - level, rate))
    level = math.min(full, level + elapsed * rate)
  end
  level = math.min(math.max(level - delta * period, -full), full)
  if level >= full then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(ceildiv(full - level, rate) / 1000))
end
