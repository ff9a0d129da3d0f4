-- run is the store's lua/run.lua (limiter.Mode: consume, peek, at most),
-- except that a refusal by the hybrid threshold (r[6] = 1) is not retried:
-- the caller decides strictly instead.
local function run(keys, argv, na, now)
  local cost, mode = tonumber(argv[na - 1]), tonumber(argv[na])
  local r = decide(keys, argv, now, cost, mode == 1)
  if mode == 2 and r[1] == 0 and r[6] == 0 then
    if r[2] >= 1 then
      r = decide(keys, argv, now, math.min(r[2], cost), false)
    elseif cost > 1 then
      r = decide(keys, argv, now, 1, true)
    end
  end
  return r
end

-- ARGV: the algorithm's parameters, cost, mode, then this region's slot,
-- the threshold and keep (see slots.lua).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local na = #ARGV - 3
regions.me, regions.threshold, regions.keep, regions.now = ARGV[na + 1], tonumber(ARGV[na + 2]), tonumber(ARGV[na + 3]), now
return run(KEYS, ARGV, na, now)
