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
  append_log(KEYS, now, add)
  local ttl = math.ceil(period / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
