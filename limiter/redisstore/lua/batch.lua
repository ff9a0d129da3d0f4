-- The batch script's helpers, before its copies of decide_values (see
-- scriptSources in scripts_gen_test.go). A batch makes many decisions in one call,
-- often several on one key, and a call runs atomically: no other client
-- sees the state between two of its decisions. So:
--
-- Each decision's arguments come as numbers (the main loop converts each
-- parameter set once), and a value read from Redis is read once: decide
-- uses Lua's own tonumber.
local rcall = redis.call

-- cached stands in for redis in the decide_values of the decisions whose key
-- comes more than once in the batch: it reads a key from Redis once and
-- keeps every write to it until the end of the call, when flushAll sends
-- each key's last state (the value and expiry its last decision wrote),
-- so Redis ends in the state the decisions made one after another would
-- have left. It answers GET, SET key value PX ms, HMGET and HSET (up to
-- four fields), and PEXPIRE ms (ms > 0) of a key with a write pending;
-- any other command, or one on a key used as another type, first writes
-- what is pending for its key, which is not held any more for the rest of
-- the call. A cached value is the number that was written, not its
-- string: decide reads values only through tonumber, which gives the same
-- number (Redis writes a number with 17 significant digits). The replies
-- of writes are not the server's: decide never reads them.
local entries, dirty = {}, {}

-- flush writes key's pending state to Redis.
local function flush(key, e)
  if e.kind == 'string' then
    rcall('SET', key, e.value, 'PX', e.ttl)
  else
    local order, fields, args = e.order, e.fields, {}
    for i = 1, #order do
      args[2 * i - 1], args[2 * i] = order[i], fields[order[i]]
    end
    rcall('HSET', key, unpack(args))
    if e.ttl ~= nil then rcall('PEXPIRE', key, e.ttl) end
  end
  e.pending, e.order, e.ttl = false, nil, nil
end

-- pending marks e as holding a write for key.
local function pending(key, e)
  if not e.pending then
    e.pending = true
    dirty[#dirty + 1] = key
  end
end

-- hset records HSET's field f = v in e, and f among the fields to write.
local function hset(e, f, v)
  local order = e.order
  if order == nil then
    order = {}
    e.order = order
  end
  local i = 1
  while order[i] ~= nil and order[i] ~= f do i = i + 1 end
  order[i] = f
  e.fields[f] = v
end

local ok = {ok = 'OK'}

local function call(cmd, key, ...)
  local e = entries[key]
  if e == false then return rcall(cmd, key, ...) end
  local n = select('#', ...)
  if cmd == 'GET' then
    if n == 0 and (e == nil or e.kind == 'string') then
      if e == nil then
        e = {kind = 'string', value = rcall('GET', key)}
        entries[key] = e
      end
      return e.value
    end
  elseif cmd == 'SET' then
    local value, px, ttl = ...
    if n == 3 and px == 'PX' and (e == nil or e.kind == 'string') then
      if e == nil then
        e = {kind = 'string'}
        entries[key] = e
      end
      e.value, e.ttl = value, ttl
      pending(key, e)
      return ok
    end
  elseif cmd == 'HMGET' then
    local a, b, c, d = ...
    if n >= 1 and n <= 4 and (e == nil or e.kind == 'hash') then
      if e == nil then
        e = {kind = 'hash', fields = {}}
        entries[key] = e
      end
      local f = e.fields
      if f[a] == nil or (n >= 2 and f[b] == nil) or (n >= 3 and f[c] == nil) or (n >= 4 and f[d] == nil) then
        -- A field written in this call keeps its pending value.
        local got = rcall('HMGET', key, ...)
        for i = 1, n do
          local name = (select(i, ...))
          if f[name] == nil then f[name] = got[i] end
        end
      end
      return {f[a], f[b], f[c], f[d]}
    end
  elseif cmd == 'HSET' then
    local f1, v1, f2, v2, f3, v3, f4, v4 = ...
    if n >= 2 and n <= 8 and n % 2 == 0 and (e == nil or e.kind == 'hash') then
      if e == nil then
        e = {kind = 'hash', fields = {}}
        entries[key] = e
      end
      hset(e, f1, v1)
      if n >= 4 then hset(e, f2, v2) end
      if n >= 6 then hset(e, f3, v3) end
      if n >= 8 then hset(e, f4, v4) end
      pending(key, e)
      return 0
    end
  elseif cmd == 'PEXPIRE' then
    local ttl = ...
    local ms = tonumber(ttl)
    if n == 1 and e ~= nil and e.pending and ms ~= nil and ms > 0 then
      e.ttl = ttl
      return 1
    end
  end
  if e ~= nil and e.pending then flush(key, e) end
  entries[key] = false
  return rcall(cmd, key, ...)
end
local cached = {call = call}

-- flushAll writes every pending state, in the order the keys were first
-- written.
local function flushAll()
  for i = 1, #dirty do
    local key = dirty[i]
    local e = entries[key]
    if e and e.pending then flush(key, e) end
  end
end
