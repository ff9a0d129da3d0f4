-- run makes one decision in the mode its last argument names, with the
-- cost before it: 0 takes the cost or nothing; 1 (peek) answers for the
-- cost and writes nothing; 2 (at most) takes the cost, or, when it does
-- not fit, as many units as fit (the rejection's remaining), if any, in
-- the same atomic step. na is the number of arguments of one decision.
local function run(keys, argv, na, now)
  local cost, mode = tonumber(argv[na - 1]), tonumber(argv[na])
  local r = decide(keys, argv, now, cost, mode == 1)
  if mode == 2 and r[1] == 0 and r[2] >= 1 then
    r = decide(keys, argv, now, math.min(r[2], cost), false)
  end
  return r
end
