-- Reservations: the main part of the reserve and settle scripts, after
-- the algorithm's decide, run and lua/<algorithm>_settle.lua (mark,
-- adjust), given nk (the algorithm's keys) and np (its parameters).
-- KEYS     the algorithm's keys, then
--          book: hash {id = "estimate:mark:policy"} (policy 1 = refund on expiry)
--          open: sorted set {id, score = expiry (µs)}; both under the key's hash tag
-- ARGV     the algorithm's parameters, cost, mode (0), id, then
--          reserve: hold (µs), policy, keep (ms: how long past the hold the record may matter)
--          settle:  actual (< 0 cancels)
-- returns  reserve: the decision's five integers; settle: {found (1/0), estimate, expired}
local book, open = KEYS[nk + 1], KEYS[nk + 2]
local id = ARGV[np + 3]

local function record(rec)
  local est, m, pol = string.match(rec, '^(%-?%d+):(%-?%d+):(%d)$')
  return tonumber(est), tonumber(m), tonumber(pol)
end

-- sweep drops the key's reservations past their hold (a bounded number a
-- call), giving back the estimate of those with the refund policy.
local function sweep()
  local ids = redis.call('ZRANGEBYSCORE', open, '-inf', string.format('%d', now), 'LIMIT', 0, 256)
  for _, old in ipairs(ids) do
    local rec = redis.call('HGET', book, old)
    if rec then
      local est, m, pol = record(rec)
      if pol == 1 then adjust(KEYS, ARGV, now, -est, m) end
      redis.call('HDEL', book, old)
    end
    redis.call('ZREM', open, old)
  end
  return #ids
end

local function reserve()
  sweep()
  if redis.call('HEXISTS', book, id) == 1 then
    return redis.error_reply('reservation id ' .. id .. ' is already open')
  end
  local r = run(KEYS, ARGV, np + 2, now)
  if r[1] > 0 then
    local hold, policy, keep = tonumber(ARGV[np + 4]), tonumber(ARGV[np + 5]), tonumber(ARGV[np + 6])
    redis.call('HSET', book, id, string.format('%d:%d:%d', r[1], mark(ARGV, now), policy))
    redis.call('ZADD', open, string.format('%d', now + hold), id)
    local ttl = math.ceil(hold / 1000) + keep
    if redis.call('PTTL', book) < ttl then
      redis.call('PEXPIRE', book, ttl)
      redis.call('PEXPIRE', open, ttl)
    end
  end
  return r
end

local function settle()
  local expired = sweep()
  local rec = redis.call('HGET', book, id)
  if not rec then
    return {0, 0, expired}
  end
  redis.call('HDEL', book, id)
  redis.call('ZREM', open, id)
  local est, m = record(rec)
  local actual = math.max(tonumber(ARGV[np + 4]), 0)
  if actual ~= est then adjust(KEYS, ARGV, now, actual - est, m) end
  return {1, est, expired}
end
