-- token_bucket: adjust for reservations (after lua/bucket_settle.lua):
-- tokens go back up to a full bucket, an excess leaves up to one bucket of
-- debt.
local function adjust(KEYS, ARGV, now, delta, charged)
  bucket_adjust(KEYS, ARGV, now, delta, true)
end
