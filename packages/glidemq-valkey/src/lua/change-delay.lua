-- Changes when a job runs as glidemq_changeDelay does: `delay` ms from now, in the job's band; 0
-- makes a delayed job waiting (or prioritized) at once; a waiting or prioritized job becomes delayed.
-- KEYS: job, stream, scheduled, events
-- ARGV: jobId, delay, now, group
-- Returns 'ok' | 'no_op' | 'error:not_found' | 'error:invalid_state' | 'error:not_in_stream' | 'error:not_in_scheduled'
local jobKey, streamKey, scheduledKey = KEYS[1], KEYS[2], KEYS[3]
local jobId, delay, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HGET', jobKey, 'state')
if not state then return 'error:not_found' end
local function bandOf(score) return math.floor(tonumber(score) / PRIORITY_SHIFT) end
if state == 'delayed' then
  local score = redis.call('ZSCORE', scheduledKey, jobId)
  if not score then return 'error:not_in_scheduled' end
  local band = bandOf(score)
  if delay == 0 and band > 0 then
    redis.call('ZADD', scheduledKey, 'XX', string.format('%.0f', band * PRIORITY_SHIFT), jobId)
    redis.call('HSET', jobKey, 'state', 'prioritized', 'delay', '0')
  elseif delay == 0 then
    redis.call('ZREM', scheduledKey, jobId)
    redis.call('XADD', streamKey, '*', 'jobId', jobId, 'name', redis.call('HGET', jobKey, 'name') or '')
    redis.call('HSET', jobKey, 'state', 'waiting', 'delay', '0')
  else
    redis.call('ZADD', scheduledKey, 'XX', string.format('%.0f', band * PRIORITY_SHIFT + now + delay), jobId)
    redis.call('HSET', jobKey, 'delay', tostring(delay))
  end
elseif state == 'waiting' then
  if delay == 0 then return 'no_op' end
  local entryId = findEntry(streamKey, jobId)
  if not entryId then return 'error:not_in_stream' end
  pcall(redis.call, 'XACK', streamKey, ARGV[4], entryId)
  redis.call('XDEL', streamKey, entryId)
  local band = tonumber(redis.call('HGET', jobKey, 'priority')) or 0
  redis.call('ZADD', scheduledKey, string.format('%.0f', band * PRIORITY_SHIFT + now + delay), jobId)
  redis.call('HSET', jobKey, 'state', 'delayed', 'delay', tostring(delay))
elseif state == 'prioritized' then
  if delay == 0 then return 'no_op' end
  local score = redis.call('ZSCORE', scheduledKey, jobId)
  if not score then return 'error:not_in_scheduled' end
  redis.call('ZADD', scheduledKey, 'XX', string.format('%.0f', bandOf(score) * PRIORITY_SHIFT + now + delay), jobId)
  redis.call('HSET', jobKey, 'state', 'delayed', 'delay', tostring(delay))
else
  return 'error:invalid_state'
end
emitEvent(KEYS[4], 'delay-changed', jobId, {'delay', tostring(delay)})
return 'ok'
