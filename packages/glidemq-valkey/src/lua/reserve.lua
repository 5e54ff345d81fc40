-- Claims up to `count` jobs in a glide-mq worker's order, atomically (lib/reserve.lua).
-- KEYS: stream, scheduled, events, priority, lifo, list-active, meta, sy:leases, failed, metrics:failed
--       (every key the claim may touch, all under the queue's hash tag)
-- ARGV: now, group, consumer, count, leaseWorker ('' = a plain glide-mq style claim, no lease fields),
--       leaseUntil, honourPause (1/0), promote (1/0)
-- Returns {{jobId, entryId, flatHash}, ...}; expired Switchyard leases come back first.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
return reserveJobs(prefix, tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4]) or 1, ARGV[5], ARGV[6],
  ARGV[7] == '1', ARGV[8] == '1')
