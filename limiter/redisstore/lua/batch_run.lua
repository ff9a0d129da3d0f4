-- run makes one decision of a batch as lua/run.lua does, on the values of
-- decide_values instead of a table: keys and argv are the decision's (argv
-- numbers already), and its five integers go straight into the reply.
local function run(keys, argv, now, cost, mode)
  local admitted, remaining, reset, retry, delay = decide_values(keys, argv, now, cost, mode == 1)
  if mode == 2 and admitted == 0 then
    if remaining >= 1 then
      return decide_values(keys, argv, now, math.min(remaining, cost), false)
    elseif cost > 1 then
      return decide_values(keys, argv, now, 1, true)
    end
  end
  return admitted, remaining, reset, retry, delay
end
