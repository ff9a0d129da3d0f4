-- sliding_log: mark and adjust for reservations. mark is the admission's
-- time: a refund removes up to −delta members of that score while it is
-- inside the window; an excess adds delta members at now, the log holding
-- at most two quotas.
local function mark(ARGV, now)
  return now
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
  if delta < 0 then
    if charged > now - period then
      local members = redis.call('ZRANGEBYSCORE', KEYS[1], charged, charged, 'LIMIT', 0, -delta)
      for i = 1, #members, 1000 do
        redis.call('ZREM', KEYS[1], unpack(members, i, math.min(i + 999, #members)))
      end
    end
    return
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
  local add = math.min(delta, 2 * rate - redis.call('ZCARD', KEYS[1]))
  if add <= 0 then return end
  local last = redis.call('INCRBY', KEYS[2], add)
  local args = {}
  for member = last - add + 1, last do
    args[#args + 1] = now
    args[#args + 1] = member
    if #args >= 1000 then
      redis.call('ZADD', KEYS[1], unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', KEYS[1], unpack(args)) end
  local ttl = math.ceil(period / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
