-- Completes an active job exactly as glidemq_complete does, optionally claiming the next one in the
-- same call as glidemq_completeAndFetchNext does (with its `active` event for list jobs).
-- KEYS: stream, completed, events, job, metrics:completed, list-active
-- ARGV: jobId, entryId ('-' = the one Switchyard recorded), returnvalue, now, group,
--       leaseWorker ('' = no lease check), fetchNext (1/0), consumer, snapshot (1/0),
--       honourPause (1/0: fetch nothing while meta.paused is 1)
-- Returns {'OK', finishedHash, nextJobId, nextEntryId, nextHash} (finishedHash is {} unless snapshot
-- is asked for, the next job only with fetchNext) | {'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}
local jobKey = KEYS[4]
local jobId = ARGV[1]
local prefix = string.sub(jobKey, 1, #jobKey - #('job:' .. jobId))
local now = tonumber(ARGV[4])
local h = redis.call('HMGET', jobKey, 'state', 'syWorker', 'processedOn', 'syLeaseStart', 'syEntryId', 'opts', 'parentId')
if not h[1] then return {'NOT_FOUND'} end
if h[1] ~= 'active' then return {'INVALID_STATE', h[1]} end
if ARGV[6] ~= '' and (h[2] ~= ARGV[6] or h[3] ~= h[4]) then return {'LEASE_LOST'} end
local entryId = ARGV[2]
if entryId == '-' then
  -- Switchyard recorded the entry at reserve; a job someone else claimed is looked up in the stream.
  entryId = h[5] or findEntry(KEYS[1], jobId) or ''
end
local processedOn = tonumber(h[3]) or now

ackAndDelete(KEYS[1], ARGV[5], entryId)
redis.call('ZADD', KEYS[2], now, jobId)
redis.call('HSET', jobKey, 'state', 'completed', 'returnvalue', ARGV[3], 'finishedOn', ARGV[4])
if h[2] then clearLease(prefix, jobKey, jobId) end
emitEvent(KEYS[3], 'completed', jobId, {'returnvalue', ARGV[3]})
recordMetrics(KEYS[5], now, now - processedOn)
if entryId == '' then decrListActive(KEYS[6]) end
notifyParent(prefix, jobKey, jobId, h[7])
local snapshot = {}
if ARGV[9] == '1' then snapshot = redis.call('HGETALL', jobKey) end
if h[6] and string.find(h[6], 'removeOnComplete', 1, true) then
  applyRetention(KEYS[2], prefix, jobKey, jobId, decodeOpts(h[6])['removeOnComplete'], now)
end

if ARGV[7] ~= '1' then return {'OK', snapshot} end
if ARGV[10] == '1' and redis.call('HGET', prefix .. 'meta', 'paused') == '1' then return {'OK', snapshot} end
local ctx = { prefix = prefix, now = now, group = ARGV[5], consumer = ARGV[8], leaseWorker = '', leaseUntil = '', activeEvents = true }
local next = fetchJobs(ctx, 1, {})
if #next == 0 then return {'OK', snapshot} end
return {'OK', snapshot, next[1][1], next[1][2], next[1][3]}
