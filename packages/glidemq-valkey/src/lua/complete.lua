-- Completes an active job exactly as glidemq_complete does, optionally claiming the next one in the
-- same call as glidemq_completeAndFetchNext does (with its `active` event for list jobs).
-- KEYS: stream, completed, events, job, metrics:completed, list-active
-- ARGV: jobId, entryId ('-' = the one Switchyard recorded), returnvalue, now, group,
--       leaseWorker ('' = no lease check), fetchNext (1/0), consumer, snapshot (1/0),
--       honourPause (1/0: fetch nothing while meta.paused is 1)
-- Returns {'OK', hashBefore, nextJobId, nextEntryId, nextHash} (hashBefore, the job's hash as read
-- before completion wrote to it, is {} unless snapshot is asked for; the next job only with
-- fetchNext) | {'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}
local jobId = ARGV[1]
local prefix = string.sub(KEYS[4], 1, #KEYS[4] - #('job:' .. jobId))
local now = tonumber(ARGV[4])
local batch = newCompletions(prefix, ARGV[5], now)
local done = completeJob(batch, jobId, ARGV[2], ARGV[3], ARGV[6], ARGV[9] == '1')
flushCompletions(batch)
if done[1] ~= 'OK' then return done end
done = {'OK', done[2]}
if ARGV[7] ~= '1' then return done end
if ARGV[10] == '1' and redis.call('HGET', prefix .. 'meta', 'paused') == '1' then return done end
local ctx = { prefix = prefix, now = now, group = ARGV[5], consumer = ARGV[8], leaseWorker = '', leaseUntil = '', activeEvents = true }
local next = fetchJobs(ctx, 1, {})
if #next == 0 then return done end
return {'OK', done[2], next[1][1], next[1][2], next[1][3]}
