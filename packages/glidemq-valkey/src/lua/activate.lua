-- Activates one stream entry a consumer read with a blocking XREADGROUP, as glidemq_moveToActive.
-- KEYS: stream
-- ARGV: now, group, consumer, jobId, entryId
-- Returns {jobId, entryId, flatHash}, or {} when the job was skipped (gone, revoked, expired).
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local ctx = { prefix = prefix, now = tonumber(ARGV[1]), group = ARGV[2], consumer = ARGV[3], leaseWorker = '', leaseUntil = '', activeEvents = false }
local hash = activateJob(ctx, ARGV[4], ARGV[5], false)
if not hash then return {} end
return {ARGV[4], ARGV[5], hash}
