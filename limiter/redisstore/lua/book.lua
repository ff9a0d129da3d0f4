-- A key's reservation book (the record formats are lua/reservations.lua's):
-- reading its records, settling those past their hold by their policy, and
-- opening one; after the algorithm's settle section (mark, adjust) and now,
-- in the reservation scripts and, per algorithm, in lua/set.lua's
-- reserving sets (open).
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

-- open_book reads book's own field, first settling the records past their
-- hold when the next expiry is due; returns next, until and whether it swept.
local function open_book(keys, argv, book)
  local next, till = readMeta(redis.call('HGET', book, ''))
  if next >= 0 and next <= now then
    return select(2, sweep(keys, argv, book)), till, true
  end
  return next, till, false
end

-- write_record records reservation id of est units taken at mark m in
-- book, whose own field open_book read (next, till, swept), with policy
-- (1 = refund on expiry), hold (µs) and keep (ms: how long past the hold
-- the record may matter).
local function write_record(book, next, till, swept, id, est, m, policy, hold, keep)
  local exp = now + hold
  local rec = string.format('%d:%d:%d:%d:%d', est, m, policy, exp, hold)
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
end

-- open records a reservation of a take already made (a set's part): its
-- id is 128 random bits, so it is not checked for being open already.
local function open(keys, argv, book, id, est, m, policy, hold, keep)
  local next, till, swept = open_book(keys, argv, book)
  write_record(book, next, till, swept, id, est, m, policy, hold, keep)
end
