-- Counts a key's open reservations: the members of its open set (KEYS[1], score = expiry in µs)
-- not past their hold on Redis's clock. It only reads, so that a usage read changes nothing;
-- the records past their hold are left for the next reserve or settle to sweep.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', now), '+inf')
