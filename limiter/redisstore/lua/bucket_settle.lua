-- token_bucket's and leaky_bucket's settle, on their one state layout:
-- KEYS[1] hash {l, t}. The level is counted as spent units (tokens
-- missing, or work queued; 0 on a fresh key), brought to now, moved by
-- delta (a refund gives back, never below 0; an excess takes, up to two
-- buckets), and the state dropped once it is that of a fresh key. A
-- missing key is fresh: a refund does nothing. No mark: a bucket has no
-- window to find.
local function mark(ARGV, now)
  return 0
end
local function bucket_adjust(KEYS, ARGV, now, delta, tokens)
  local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local full = burst * period
  local state = redis.call('HMGET', KEYS[1], 'l', 't')
  local level, at = tonumber(state[1]), tonumber(state[2])
  local spent = 0
  if not (level and at) then
    if delta < 0 then return end
  else
    spent = level
    if tokens then spent = full - level end
    local elapsed = math.min(math.max(now - at, 0), ceildiv(spent, rate))
    spent = math.max(0, spent - elapsed * rate)
  end
  spent = math.min(math.max(spent + delta * period, 0), 2 * full)
  if spent <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  level = spent
  if tokens then level = full - spent end
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(ceildiv(spent, rate) / 1000))
end
