-- Cancels a job the way glidemq_revoke marks it (revoked=1, failed with reason `revoked`), and also
-- takes an active job from its worker: its stream entry is acknowledged and deleted.
-- KEYS: job, stream, scheduled, failed, events, priority, lifo, list-active
-- ARGV: jobId, now, group
-- Returns 'revoked' | 'NOT_FOUND' | 'INVALID_STATE:<state>'
local jobKey = KEYS[1]
local jobId = ARGV[1]
local prefix = string.sub(jobKey, 1, #jobKey - #('job:' .. jobId))
local h = redis.call('HMGET', jobKey, 'state', 'syEntryId')
local state = h[1]
if not state then return 'NOT_FOUND' end
if state == 'completed' or state == 'failed' then return 'INVALID_STATE:' .. state end
redis.call('ZREM', KEYS[3], jobId)
redis.call('ZREM', prefix .. 'sy:blocked', jobId)
local inList = redis.call('LREM', KEYS[6], 0, jobId) + redis.call('LREM', KEYS[7], 0, jobId)
local entryId = h[2] or nil
local inStream = state == 'waiting' or state == 'active'
if entryId == nil and inList == 0 and inStream then
  -- Not claimed through Switchyard: find the job's stream entry (waiting, or held by a glide-mq worker).
  entryId = findEntry(KEYS[2], jobId)
end
if entryId and entryId ~= '' then
  ackAndDelete(KEYS[2], ARGV[3], entryId)
elseif state == 'active' then
  decrListActive(KEYS[8])
end
clearLease(prefix, jobKey, jobId)
redis.call('ZADD', KEYS[4], tonumber(ARGV[2]), jobId)
redis.call('HSET', jobKey, 'revoked', '1', 'state', 'failed', 'failedReason', 'revoked', 'finishedOn', ARGV[2])
emitEvent(KEYS[5], 'revoked', jobId, nil)
return 'revoked'
