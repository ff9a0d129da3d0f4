-- Counts a key's open reservations: the records of its book (KEYS[1], see
-- lua/reservations.lua) neither past their hold on Redis's clock nor
-- tombstones. It only reads, so that a usage read changes nothing; the
-- records past their hold are left for the next reserve, settle or renew
-- to sweep.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local all, n = redis.call('HGETALL', KEYS[1]), 0
for i = 1, #all, 2 do
  if all[i] ~= '' and string.sub(all[i + 1], 1, 2) ~= 'x:' then
    local exp = tonumber(string.match(all[i + 1], '^%-?%d+:%-?%d+:%d:(%-?%d+)'))
    if exp == nil or exp > now then n = n + 1 end
  end
end
return n
