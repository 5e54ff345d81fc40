-- Completes several active jobs of one worker in one call and claims as many next jobs: the batched
-- form of glidemq_completeAndFetchNext a concurrent worker uses. Each job ends exactly as
-- complete.lua would leave it.
-- KEYS: stream, completed, events, metrics:completed, list-active, meta
-- ARGV: now, group, consumer, fetchCount, honourPause (1/0), then jobId, entryId, returnvalue per job
-- Returns {statuses, nextJobs}: statuses[i] is 'OK' or the refusal, nextJobs {{id, entryId, hash}...}
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local now = tonumber(ARGV[1])
local batch = newCompletions(prefix, ARGV[2], now)
local statuses = {}
for offset = 6, #ARGV, 3 do
  statuses[#statuses + 1] = completeJob(batch, ARGV[offset], ARGV[offset + 1], ARGV[offset + 2], '', false)[1]
end
flushCompletions(batch)
local fetchCount = tonumber(ARGV[4]) or 0
if fetchCount == 0 or (ARGV[5] == '1' and redis.call('HGET', KEYS[6], 'paused') == '1') then return {statuses, {}} end
local ctx = { prefix = prefix, now = now, group = ARGV[2], consumer = ARGV[3], leaseWorker = '', leaseUntil = '', activeEvents = true }
return {statuses, fetchJobs(ctx, fetchCount, {})}
