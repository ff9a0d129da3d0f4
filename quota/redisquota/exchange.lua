-- One exchange of a shared limit's demands: KEYS[1] is the hash of every
-- replica's clients of the limit, field the client, value "<ms> <known> <rate>"
-- where ms is when it was recorded on Redis's own clock (so that replicas'
-- clocks do not matter). ARGV[1] is how long (ms) an entry lives unrecorded
-- (0: for ever), ARGV[2] the number n of this replica's clients recorded, then
-- n pairs of client and "<known> <rate>", then the clients gone. Returns the
-- live entries as client, "<known> <rate>", ...
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local i = 3
for _ = 1, n do
  redis.call('HSET', KEYS[1], ARGV[i], now .. ' ' .. ARGV[i + 1])
  i = i + 2
end
for j = i, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[j])
end
local all = redis.call('HGETALL', KEYS[1])
local out, dead = {}, {}
for j = 1, #all, 2 do
  local at, rest = string.match(all[j + 1], '^(%d+) (.*)$')
  if at == nil or (stale > 0 and now - tonumber(at) > stale) then
    dead[#dead + 1] = all[j]
    -- HDEL in chunks: unpack of a long table overflows Lua's C stack.
    if #dead >= 500 then
      redis.call('HDEL', KEYS[1], unpack(dead))
      dead = {}
    end
  else
    out[#out + 1] = all[j]
    out[#out + 1] = rest
  end
end
if #dead > 0 then
  redis.call('HDEL', KEYS[1], unpack(dead))
end
-- A limit no replica exchanges any more goes away with its last entry's life.
if stale > 0 and #out > 0 then
  redis.call('PEXPIRE', KEYS[1], stale * 2)
end
return out
