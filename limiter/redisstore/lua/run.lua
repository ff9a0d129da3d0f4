-- run makes one decision in the mode its last argument names, with the
-- cost before it: 0 takes the cost or nothing; 1 (peek) answers for the
-- cost and writes nothing; 2 (at most) takes the cost, or, when it does
-- not fit, as many units as fit (the rejection's remaining), in the same
-- atomic step, and when not one fits answers as a refused single unit
-- (its retry after is when one will fit). na is the number of arguments
-- of one decision.
local function run(keys, argv, na, now)
  local cost, mode = tonumber(argv[na - 1]), tonumber(argv[na])
  local r = decide(keys, argv, now, cost, mode == 1)
  if mode == 2 and r[1] == 0 then
    if r[2] >= 1 then
      r = decide(keys, argv, now, math.min(r[2], cost), false)
    elseif cost > 1 then
      r = decide(keys, argv, now, 1, true)
    end
  end
  return r
end
