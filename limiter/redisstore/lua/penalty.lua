-- The penalty box's strike, atomically: KEYS[1] counts the key's refusals
-- and expires within ms after the first; the after-th puts KEYS[2] in the
-- box for exactly for ms (PX, on this server's clock) unless it is there.
-- ARGV: after, within (ms), for (ms). Returns the ms boxed for, else 0.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n < tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return tonumber(ARGV[3])
