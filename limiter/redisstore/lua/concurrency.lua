-- concurrency: concurrency leases per key, one atomic call per operation on
-- Redis's clock (now, µs), alone or many in one batch (lease.go). Leases
-- past their expiry are dropped, and counted, first.
-- key      sorted set: lease id → expiry (µs)
-- kind     0 acquire, 1 release, 2 renew; id the lease's; limit and ttl (µs) acquire's and renew's
-- returns  four integers:
--          acquire: 1 admitted / 0 refused, leases held, expired dropped, µs until the earliest expiry
--          release: 1 released / 0 not held, leases held, expired dropped, 0
--          renew:   1 renewed / 0 not held, leases held, expired dropped, the new expiry (µs)
--
-- Numbers go to redis.call as text formatted once a call: redis.call formats
-- a number argument itself, which costs about as much as a short command.
local nowText = string.format('%.0f', now)

-- texts[ttl] is {a lease's expiry, the set's life (ms), when to renew it
-- (ms left)}, as redis.call takes them.
local texts = {}
local function textsOf(ttl)
  local t = texts[ttl]
  if t == nil then
    t = {string.format('%.0f', now + ttl), string.format('%.0f', math.ceil(3 * ttl / 1000)), 2 * ttl / 1000}
    texts[ttl] = t
  end
  return t
end

local function lease(key, kind, id, limit, ttl)
  local expired = redis.call('ZREMRANGEBYSCORE', key, '-inf', nowText)
  if kind == 1 then
    local released = redis.call('ZREM', key, id)
    return released, redis.call('ZCARD', key), expired, 0
  end
  if kind == 2 then
    local renewed = redis.call('ZADD', key, 'XX', 'CH', textsOf(ttl)[1], id)
    local held = redis.call('ZCARD', key)
    if renewed == 0 and not redis.call('ZSCORE', key, id) then
      return 0, held, expired, 0
    end
    local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    redis.call('PEXPIRE', key, math.ceil((tonumber(last[2]) - now + ttl) / 1000))
    return 1, held, expired, now + ttl
  end
  local held = redis.call('ZCARD', key)
  if held >= limit then
    local first = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
    return 0, held, expired, tonumber(first[2]) - now
  end
  local t = textsOf(ttl)
  redis.call('ZADD', key, t[1], id)
  -- The set outlives its last lease by at least one TTL, so that a leak is
  -- still counted by the key's next call; then Redis drops it. Its life is
  -- set to three TTLs when under two are left (an empty set was deleted,
  -- so a new one has none), not on every acquire: a key's leases then cost
  -- a PTTL each, not a ZRANGE and a PEXPIRE.
  if held == 0 or redis.call('PTTL', key) < t[3] then
    redis.call('PEXPIRE', key, t[2])
  end
  return 1, held + 1, expired, 0
end
