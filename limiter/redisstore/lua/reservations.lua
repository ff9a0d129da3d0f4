-- Reservations: the main part of the reserve, settle and renew scripts,
-- after the algorithm's decide, run and the settle section of
-- lua/<algorithm>.lua (mark, adjust), given nk (the algorithm's keys) and
-- np (its parameters), and lua/book.lua.
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
-- reserve records an admitted reservation; its id is 128 random bits, so
-- it is not checked for being open already.
local function reserve(keys, argv)
  local book = keys[nk + 1]
  local next, till, swept = open_book(keys, argv, book)
  local r = run(keys, argv, np + 2, now)
  if r[1] > 0 then
    write_record(book, next, till, swept, argv[np + 3], r[1], mark(argv, now),
      tonumber(argv[np + 5]), tonumber(argv[np + 4]), tonumber(argv[np + 6]))
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
