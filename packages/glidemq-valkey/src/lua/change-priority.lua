-- Changes a job's priority as glidemq_changePriority does: a waiting job leaves the stream for its
-- band in `scheduled` (prioritized), a prioritized one moves band (or back to the stream at 0), a
-- delayed one keeps its due time in the new band.
-- KEYS: job, stream, scheduled, events
-- ARGV: jobId, priority, group
-- Returns 'ok' | 'no_op' | 'error:not_found' | 'error:invalid_state' | 'error:not_in_stream' | 'error:not_in_scheduled'
local jobKey, streamKey, scheduledKey = KEYS[1], KEYS[2], KEYS[3]
local jobId, priority = ARGV[1], tonumber(ARGV[2])
local state = redis.call('HGET', jobKey, 'state')
if not state then return 'error:not_found' end
local band = string.format('%.0f', priority * PRIORITY_SHIFT)
if state == 'waiting' then
  if priority == 0 then return 'no_op' end
  local entryId = findEntry(streamKey, jobId)
  if not entryId then return 'error:not_in_stream' end
  pcall(redis.call, 'XACK', streamKey, ARGV[3], entryId)
  redis.call('XDEL', streamKey, entryId)
  redis.call('ZADD', scheduledKey, band, jobId)
  redis.call('HSET', jobKey, 'state', 'prioritized', 'priority', tostring(priority))
elseif state == 'prioritized' then
  if priority == 0 then
    redis.call('ZREM', scheduledKey, jobId)
    redis.call('XADD', streamKey, '*', 'jobId', jobId, 'name', redis.call('HGET', jobKey, 'name') or '')
    redis.call('HSET', jobKey, 'state', 'waiting', 'priority', '0')
  else
    redis.call('ZADD', scheduledKey, band, jobId)
    redis.call('HSET', jobKey, 'priority', tostring(priority))
  end
elseif state == 'delayed' then
  local score = redis.call('ZSCORE', scheduledKey, jobId)
  if not score then return 'error:not_in_scheduled' end
  local due = tonumber(score) % PRIORITY_SHIFT
  redis.call('ZADD', scheduledKey, string.format('%.0f', priority * PRIORITY_SHIFT + due), jobId)
  redis.call('HSET', jobKey, 'priority', tostring(priority))
else
  return 'error:invalid_state'
end
-- The core priority Switchyard kept beside glide-mq's no longer holds.
redis.call('HDEL', jobKey, 'syPriority')
emitEvent(KEYS[4], 'priority-changed', jobId, {'priority', tostring(priority)})
return 'ok'
