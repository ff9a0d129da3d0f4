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
-- reserve and settle take the keys and arguments of one call, so that a
-- batch (lua/reservations_batch.lua) runs many in one.
local function record(rec)
  local est, m, pol = string.match(rec, '^(%-?%d+):(%-?%d+):(%d)$')
  return tonumber(est), tonumber(m), tonumber(pol)
end

-- sweep drops the key's reservations past their hold (a bounded number a
-- call), giving back the estimate of those with the refund policy.
local function sweep(keys, argv)
  local book, open = keys[nk + 1], keys[nk + 2]
  local ids = redis.call('ZRANGEBYSCORE', open, '-inf', string.format('%d', now), 'LIMIT', 0, 256)
  for _, old in ipairs(ids) do
    local rec = redis.call('HGET', book, old)
    if rec then
      local est, m, pol = record(rec)
      if pol == 1 then adjust(keys, argv, now, -est, m) end
      redis.call('HDEL', book, old)
    end
    redis.call('ZREM', open, old)
  end
  return #ids
end

-- reserve records an admitted reservation; its id is 128 random bits, so
-- it is not checked for being open already.
local function reserve(keys, argv)
  sweep(keys, argv)
  local r = run(keys, argv, np + 2, now)
  if r[1] > 0 then
    local book, open, id = keys[nk + 1], keys[nk + 2], argv[np + 3]
    local hold, policy, keep = tonumber(argv[np + 4]), tonumber(argv[np + 5]), tonumber(argv[np + 6])
    redis.call('HSET', book, id, string.format('%d:%d:%d', r[1], mark(argv, now), policy))
    redis.call('ZADD', open, string.format('%d', now + hold), id)
    -- Extended to twice what the record needs, so that most calls only read it.
    local ttl = math.ceil(hold / 1000) + keep
    if redis.call('PTTL', book) < ttl then
      redis.call('PEXPIRE', book, 2 * ttl)
      redis.call('PEXPIRE', open, 2 * ttl)
    end
  end
  return r
end

local function settle(keys, argv)
  local book, open, id = keys[nk + 1], keys[nk + 2], argv[np + 3]
  local expired = sweep(keys, argv)
  local rec = redis.call('HGET', book, id)
  if not rec then
    return {0, 0, expired}
  end
  redis.call('HDEL', book, id)
  redis.call('ZREM', open, id)
  local est, m = record(rec)
  local actual = math.max(tonumber(argv[np + 4]), 0)
  if actual ~= est then adjust(keys, argv, now, actual - est, m) end
  return {1, est, expired}
end
