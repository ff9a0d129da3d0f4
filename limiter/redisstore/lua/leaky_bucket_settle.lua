-- leaky_bucket: adjust for reservations (after lua/bucket_settle.lua):
-- work leaves the queue down to empty, an excess queues up to two buckets.
local function adjust(KEYS, ARGV, now, delta, charged)
  bucket_adjust(KEYS, ARGV, now, delta, false)
end
