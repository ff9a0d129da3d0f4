-- run makes one decision in the mode its last argument names, the cost
-- before it (limiter.Mode): 0 takes the cost or nothing, 1 (peek) answers
-- for the cost and writes nothing, 2 (at most) takes the cost or, when it
-- does not fit, as many units as fit, in the same atomic step. A refusal by
-- the hybrid threshold (r[6] = 1) is not retried: the caller decides
-- strictly instead.
local function run(keys, argv, now)
  local na = #argv
  local cost, mode = tonumber(argv[na - 1]), tonumber(argv[na])
  local r = decide(keys, argv, now, cost, mode == 1)
  if mode == 2 and r[1] == 0 and r[6] == 0 and r[2] >= 1 then
    r = decide(keys, argv, now, math.min(r[2], cost), false)
  end
  return r
end
