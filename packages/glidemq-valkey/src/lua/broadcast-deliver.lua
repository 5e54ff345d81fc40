-- Delivers one stream entry to a broadcast subscription, as glide-mq's BroadcastWorker does with a
-- processor that returns nothing: glidemq_moveToActive then glidemq_complete, both in broadcast mode,
-- so the entry is acknowledged for this subscription (consumer group) and never deleted: the other
-- subscriptions still read it. A job another subscription completed is run and completed again.
-- KEYS: stream, job, completed, events, metrics:completed
-- ARGV: jobId, entryId, group (the subscription), now
-- Returns the job hash (flat) as it was activated, or {} when the entry is skipped (job gone,
-- revoked or expired).
local streamKey, jobKey, completedKey, eventsKey, metricsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local jobId, entryId, group = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local prefix = string.sub(jobKey, 1, #jobKey - #('job:' .. jobId))
local nowStr = tostring(now)

redis.call('XACK', streamKey, group, entryId)
local hash = redis.call('HGETALL', jobKey)
if #hash == 0 then return {} end
local fields = {}
for i = 1, #hash, 2 do fields[hash[i]] = hash[i + 1] end
if fields.revoked == '1' then
  if fields.state ~= 'failed' then
    redis.call('ZADD', prefix .. 'failed', now, jobId)
    redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', 'revoked', 'finishedOn', nowStr)
    emitEvent(eventsKey, 'failed', jobId, {'failedReason', 'revoked'})
  end
  return {}
end
if isExpired(jobKey, now) then
  expireJob(prefix, jobKey, jobId, now)
  return {}
end

redis.call('HSET', jobKey, 'state', 'active', 'processedOn', nowStr, 'lastActive', nowStr)
local activated = redis.call('HGETALL', jobKey)
-- The processor answered nothing: returnvalue 'null', as glide-mq stores an undefined result.
redis.call('ZADD', completedKey, now, jobId)
redis.call('HSET', jobKey, 'state', 'completed', 'returnvalue', 'null', 'finishedOn', nowStr)
emitEvent(eventsKey, 'completed', jobId, {'returnvalue', 'null'})
recordMetrics(metricsKey, now, 0)
return activated
