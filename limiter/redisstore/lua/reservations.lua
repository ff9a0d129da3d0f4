-- Reservations: the main part of the reserve, settle and renew scripts,
-- after the algorithm's decide, run and the settle section of
-- lua/<algorithm>.lua (mark, adjust), given nk (the algorithm's keys) and
-- np (its parameters).
-- KEYS     the algorithm's keys, then the book, under the key's hash tag: a
--          hash {id = "estimate:mark:policy:expiry:hold (µs)"} (policy 1 =
--          refund on expiry) and, in the field "" (never an id), the book's
--          own "next:until": no record expires before next (µs; -1 when it
--          holds none) and its TTL lasts until until (µs)
-- ARGV     the algorithm's parameters, cost, mode (0), id, then
--          reserve, renew: hold (µs), policy, keep (ms: how long past the hold the record may matter)
--          settle:  actual (< 0 cancels), quota (a late charge's cap); the id
--          "" charges actual (≥ 1) instead, as a reservation of 0 opened
--          now settled at it would
-- returns  reserve: the decision's five integers
--          settle: {found (1; 2: it had expired, settled late; 0: unknown), estimate, expired, late charge}
--          renew: {renewed (1/0), estimate, expired, new expiry (µs)}
-- The calls take the keys and arguments of one call, so that a batch
-- (lua/reservations_batch.lua) runs many in one. A call reads the book's
-- own field (with the id's record, for a settle or renew) and writes it
-- with the record; only once next is due does it read every record, as
-- the memory store does, to settle those past their hold by their policy
-- and find the next expiry.
-- A record past its hold stays one hold more as a tombstone,
-- "x:estimate:policy:forget (µs)", so that a settle arriving late still
-- charges the actual cost beyond what the expiry took (the estimate, or
-- nothing when refunded) to the key's current window or bucket.
-- A record without its expiry, "estimate:mark:policy", is one written
-- without the book's own field: it never comes due, and settles once; one
-- without its hold expires without a tombstone.
local function record(rec)
  local est, pol, forget = string.match(rec, '^x:(%-?%d+):(%d):(%-?%d+)$')
  if est then
    return tonumber(est), 0, tonumber(pol), tonumber(forget), nil, true
  end
  local m, exp, hold
  est, m, pol, exp, hold = string.match(rec, '^(%-?%d+):(%-?%d+):(%d):?(%-?%d*):?(%d*)$')
  return tonumber(est), tonumber(m), tonumber(pol), tonumber(exp) or math.huge, tonumber(hold), false
end

local function readMeta(meta)
  if not meta then return -1, 0 end
  local next, till = string.match(meta, '^(%-?%d+):(%-?%d+)$')
  return tonumber(next), tonumber(till)
end

local function writeMeta(next, till)
  return string.format('%d:%d', next, till)
end

-- sweep turns the book's records past their hold into tombstones, giving
-- back the estimate of those with the refund policy, drops the tombstones
-- past theirs, and returns how many records expired and the earliest
-- expiry of those left (-1: none).
local function sweep(keys, argv, book)
  local all = redis.call('HGETALL', book)
  local n, next, ngone, gone, tombs = 0, -1, 0, {}, {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      local est, m, pol, exp, hold, dead = record(all[i + 1])
      if exp <= now then
        if not dead then
          n = n + 1
          if pol == 1 then adjust(keys, argv, now, -est, m) end
        end
        if dead or not hold then
          ngone = ngone + 1
          gone[ngone] = all[i]
          exp = math.huge
        else
          exp = now + hold
          tombs[#tombs + 1] = all[i]
          tombs[#tombs + 1] = string.format('x:%d:%d:%d', est, pol, exp)
        end
      end
      if exp ~= math.huge and (next < 0 or exp < next) then
        next = exp
      end
    end
  end
  for i = 1, ngone, 1000 do
    redis.call('HDEL', book, unpack(gone, i, math.min(i + 999, ngone)))
  end
  for i = 1, #tombs, 1000 do
    redis.call('HSET', book, unpack(tombs, i, math.min(i + 999, #tombs)))
  end
  return n, next
end

-- extendBook is the book's until and whether its TTL must grow to keep a
-- record of hold (µs) and its tombstone; twice what they need, so that
-- most calls only read it.
local function extendBook(till, hold, keep)
  local ttl = math.ceil(2 * hold / 1000) + keep
  if till < now + ttl * 1000 then
    return now + 2 * ttl * 1000, 2 * ttl
  end
  return till, nil
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
    local rec = string.format('%d:%d:%d:%d:%d', r[1], mark(argv, now), policy, exp, hold)
    local extend
    till, extend = extendBook(till, hold, keep)
    if swept or extend or next < 0 or exp < next then
      -- The book's own field changes only when next or until moves.
      if next < 0 or exp < next then next = exp end
      redis.call('HSET', book, id, rec, '', writeMeta(next, till))
    else
      redis.call('HSET', book, id, rec)
    end
    if extend then redis.call('PEXPIRE', book, extend) end
  elseif swept then
    redis.call('HSET', book, '', writeMeta(next, till))
  end
  return r
end

-- due reads the book's own field and id's record, first settling the
-- records past their hold when the next expiry is due.
local function due(keys, argv, book, id)
  local got = redis.call('HMGET', book, '', id)
  local next, till = readMeta(got[1])
  local rec, expired = got[2], 0
  if id == '' then rec = nil end -- HMGET read the book's own field twice
  if next >= 0 and next <= now then
    expired, next = sweep(keys, argv, book)
    if rec then rec = redis.call('HGET', book, id) or nil end
    redis.call('HSET', book, '', writeMeta(next, till))
  end
  return rec, expired, next, till
end

local function settle(keys, argv)
  local book, id = keys[nk + 1], argv[np + 3]
  local rec, expired = due(keys, argv, book, id)
  local actual = math.max(tonumber(argv[np + 4]), 0)
  if id == '' then
    -- A charge: the excess of a reservation of 0, taken even past the limit.
    adjust(keys, argv, now, actual, mark(argv, now))
    return {1, 0, expired, 0}
  end
  if not rec then
    return {0, 0, expired, 0}
  end
  redis.call('HDEL', book, id)
  local est, m, pol, _, _, dead = record(rec)
  if dead then
    -- Settled late: what the expiry did not take, into the current window.
    local took = est
    if pol == 1 then took = 0 end
    local late = math.min(math.max(actual - took, 0), tonumber(argv[np + 5]) or math.huge)
    if late > 0 then adjust(keys, argv, now, late, mark(argv, now)) end
    return {2, est, expired, late}
  end
  if actual ~= est then adjust(keys, argv, now, actual - est, m) end
  return {1, est, expired, 0}
end

-- renew extends an open record to hold from now.
local function renew(keys, argv)
  local book, id = keys[nk + 1], argv[np + 3]
  local rec, expired, next, till = due(keys, argv, book, id)
  if not rec then
    return {0, 0, expired, 0}
  end
  local est, m, pol, _, _, dead = record(rec)
  if dead then
    return {0, est, expired, 0}
  end
  local hold, keep = tonumber(argv[np + 4]), tonumber(argv[np + 6])
  local exp = now + hold
  local extend
  till, extend = extendBook(till, hold, keep)
  local fresh = string.format('%d:%d:%d:%d:%d', est, m, pol, exp, hold)
  if extend or next < 0 or exp < next then
    if next < 0 or exp < next then next = exp end
    redis.call('HSET', book, id, fresh, '', writeMeta(next, till))
  else
    -- next may now come before every expiry: a sweep then finds none due.
    redis.call('HSET', book, id, fresh)
  end
  if extend then redis.call('PEXPIRE', book, extend) end
  return {1, est, expired, exp}
end
