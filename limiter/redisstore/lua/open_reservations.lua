-- Counts a key's open reservations: the records of its book (KEYS[1], see
-- lua/reservations.lua) not past their hold on Redis's clock. It only
-- reads, so that a usage read changes nothing; the records past their hold
-- are left for the next reserve or settle to sweep. Until the book's next
-- expiry is due that is every field but the book's own.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local book = KEYS[1]
local meta = redis.call('HGET', book, '')
local next = -1
if meta then next = tonumber(string.match(meta, '^(%-?%d+):')) end
if next < 0 or now < next then
  local n = redis.call('HLEN', book)
  if meta then n = n - 1 end
  return n
end
local all, n = redis.call('HGETALL', book), 0
for i = 1, #all, 2 do
  if all[i] ~= '' then
    local exp = tonumber(string.match(all[i + 1], '^%-?%d+:%-?%d+:%d:(%-?%d+)$'))
    if exp == nil or exp > now then n = n + 1 end
  end
end
return n
