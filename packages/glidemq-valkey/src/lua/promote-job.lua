-- Makes one delayed job waiting now, as glidemq_promoteJob does: onto the lifo list, the priority
-- list (a prioritized job) or the stream.
-- KEYS: job, stream, scheduled, events
-- ARGV: jobId
-- Returns 'ok' | 'error:not_found' | 'error:not_delayed'
local jobKey, jobId = KEYS[1], ARGV[1]
local h = redis.call('HMGET', jobKey, 'state', 'priority', 'lifo', 'name')
if not h[1] then return 'error:not_found' end
if h[1] ~= 'delayed' then return 'error:not_delayed' end
local prefix = string.sub(jobKey, 1, #jobKey - #('job:' .. jobId))
redis.call('ZREM', KEYS[3], jobId)
if h[3] == '1' then
  redis.call('RPUSH', prefix .. 'lifo', jobId)
elseif (tonumber(h[2]) or 0) > 0 then
  redis.call('LPUSH', prefix .. 'priority', jobId)
else
  redis.call('XADD', KEYS[2], '*', 'jobId', jobId, 'name', h[4] or '')
end
redis.call('HSET', jobKey, 'state', 'waiting', 'delay', '0')
emitEvent(KEYS[4], 'promoted', jobId, nil)
return 'ok'
