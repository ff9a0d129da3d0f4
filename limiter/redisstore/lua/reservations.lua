-- Reservations: the main part of the reserve and settle scripts, after
-- the algorithm's decide, run and lua/<algorithm>_settle.lua (mark,
-- adjust), given nk (the algorithm's keys) and np (its parameters).
-- KEYS     the algorithm's keys, then the book, under the key's hash tag: a
--          hash {id = "estimate:mark:policy:expiry (µs)"} (policy 1 =
--          refund on expiry) and, in the field "" (never an id), the book's
--          own "next:until": no record expires before next (µs; -1 when it
--          holds none) and its TTL lasts until until (µs)
-- ARGV     the algorithm's parameters, cost, mode (0), id, then
--          reserve: hold (µs), policy, keep (ms: how long past the hold the record may matter)
--          settle:  actual (< 0 cancels); the id "" charges actual (≥ 1)
--          instead, as a reservation of 0 opened now settled at it would
-- returns  reserve: the decision's five integers; settle: {found (1/0), estimate, expired}
-- reserve and settle take the keys and arguments of one call, so that a
-- batch (lua/reservations_batch.lua) runs many in one. A call reads the
-- book's own field (with the id's record, for a settle) and writes it
-- with the record; only once next is due does it read every record, as
-- the memory store does, to settle those past their hold by their policy
-- and find the next expiry.
-- A record without its expiry, "estimate:mark:policy", is one written
-- without the book's own field: it never comes due, and settles once.
local function record(rec)
  local est, m, pol, exp = string.match(rec, '^(%-?%d+):(%-?%d+):(%d):?(%-?%d*)$')
  return tonumber(est), tonumber(m), tonumber(pol), tonumber(exp) or math.huge
end

local function readMeta(meta)
  if not meta then return -1, 0 end
  local next, till = string.match(meta, '^(%-?%d+):(%-?%d+)$')
  return tonumber(next), tonumber(till)
end

local function writeMeta(next, till)
  return string.format('%d:%d', next, till)
end

-- sweep drops the book's records past their hold, giving back the
-- estimate of those with the refund policy, and returns how many it
-- dropped and the earliest expiry of those left (-1: none).
local function sweep(keys, argv, book)
  local all = redis.call('HGETALL', book)
  local n, next, gone = 0, -1, {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      local est, m, pol, exp = record(all[i + 1])
      if exp <= now then
        if pol == 1 then adjust(keys, argv, now, -est, m) end
        n = n + 1
        gone[n] = all[i]
      elseif exp ~= math.huge and (next < 0 or exp < next) then
        next = exp
      end
    end
  end
  for i = 1, n, 1000 do
    redis.call('HDEL', book, unpack(gone, i, math.min(i + 999, n)))
  end
  return n, next
end

-- reserve records an admitted reservation; its id is 128 random bits, so
-- it is not checked for being open already.
local function reserve(keys, argv)
  local book = keys[nk + 1]
  local meta = redis.call('HGET', book, '')
  local next, till = readMeta(meta)
  local swept = false
  if next >= 0 and next <= now then
    next = select(2, sweep(keys, argv, book))
    swept = true
  end
  local r = run(keys, argv, np + 2, now)
  if r[1] > 0 then
    local id, hold, policy, keep = argv[np + 3], tonumber(argv[np + 4]), tonumber(argv[np + 5]), tonumber(argv[np + 6])
    local exp = now + hold
    local rec = string.format('%d:%d:%d:%d', r[1], mark(argv, now), policy, exp)
    -- Extended to twice what the record needs, so that most calls only read it.
    local ttl = math.ceil(hold / 1000) + keep
    local extend = till < now + ttl * 1000
    if extend then till = now + 2 * ttl * 1000 end
    if swept or extend or next < 0 or exp < next then
      -- The book's own field changes only when next or until moves.
      if next < 0 or exp < next then next = exp end
      redis.call('HSET', book, id, rec, '', writeMeta(next, till))
    else
      redis.call('HSET', book, id, rec)
    end
    if extend then redis.call('PEXPIRE', book, 2 * ttl) end
  elseif swept then
    redis.call('HSET', book, '', writeMeta(next, till))
  end
  return r
end

local function settle(keys, argv)
  local book, id = keys[nk + 1], argv[np + 3]
  local got = redis.call('HMGET', book, '', id)
  local next, till = readMeta(got[1])
  local rec, expired = got[2], 0
  if id == '' then rec = nil end -- HMGET read the book's own field twice
  if next >= 0 and next <= now then
    expired, next = sweep(keys, argv, book)
    if rec and select(4, record(rec)) <= now then rec = nil end
    redis.call('HSET', book, '', writeMeta(next, till))
  end
  if id == '' then
    -- A charge: the excess of a reservation of 0, taken even past the limit.
    adjust(keys, argv, now, math.max(tonumber(argv[np + 4]), 0), mark(argv, now))
    return {1, 0, expired}
  end
  if not rec then
    return {0, 0, expired}
  end
  redis.call('HDEL', book, id)
  local est, m = record(rec)
  local actual = math.max(tonumber(argv[np + 4]), 0)
  if actual ~= est then adjust(keys, argv, now, actual - est, m) end
  return {1, est, expired}
end
