-- Fails an active job exactly as glidemq_fail does: retry into `scheduled` with the job's backoff
-- while attempts remain, else `failed` with retention (removeOnFail).
-- KEYS: stream, failed, scheduled, events, job, metrics:failed, list-active
-- ARGV: jobId, entryId ('-' = the one Switchyard recorded), failedReason, now, group,
--       leaseWorker ('' = no check), retry (1/0), backoffOverride ('' = from opts.backoff), random (jitter),
--       errorGroup ('' = none), snapshot (1/0),
--       countStalls ('1': attempts used = attemptsMade + stalledCount, Switchyard's count of handouts,
--       since its reserve counts an expired lease as a stall; otherwise glide-mq's attemptsMade alone)
-- Returns {'retrying', delayMs} | {'failed', finishedHash ({} unless snapshot is asked for)} | {'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}
local jobKey = KEYS[5]
local jobId = ARGV[1]
local prefix = string.sub(jobKey, 1, #jobKey - #('job:' .. jobId))
local now = tonumber(ARGV[4])
local h = redis.call('HMGET', jobKey, 'state', 'syWorker', 'processedOn', 'syLeaseStart', 'syEntryId', 'opts',
  'maxAttempts', 'priority', 'attemptsMade', 'stalledCount')
if not h[1] then return {'NOT_FOUND'} end
if h[1] ~= 'active' then return {'INVALID_STATE', h[1]} end
if ARGV[6] ~= '' and (h[2] ~= ARGV[6] or h[3] ~= h[4]) then return {'LEASE_LOST'} end
local entryId = ARGV[2]
if entryId == '-' then
  -- Switchyard recorded the entry at reserve; a job someone else claimed is looked up in the stream.
  entryId = (h[3] == h[4] and h[5]) or findEntry(KEYS[1], jobId) or ''
end
local processedOn = tonumber(h[3]) or now
local opts = decodeOpts(h[6])
local maxAttempts = 0
if ARGV[7] == '1' then maxAttempts = tonumber(opts['attempts']) or tonumber(h[7]) or 0 end

ackAndDelete(KEYS[1], ARGV[5], entryId)
local before = tonumber(h[9]) or 0
local attemptsMade = redis.call('HINCRBY', jobKey, 'attemptsMade', 1)
if h[2] then clearLease(prefix, jobKey, jobId) end
if ARGV[10] ~= '' then redis.call('HSET', jobKey, 'syErrorGroup', ARGV[10]) else redis.call('HDEL', jobKey, 'syErrorGroup') end
if entryId == '' then decrListActive(KEYS[7]) end

local used = attemptsMade
if ARGV[12] == '1' then used = attemptsMade + (tonumber(h[10]) or 0) end
if maxAttempts > 0 and used < maxAttempts then
  local delay = tonumber(ARGV[8])
  if not delay then
    delay = 0
    local backoff = opts['backoff']
    if type(backoff) == 'table' then
      local base = tonumber(backoff['delay']) or 0
      if backoff['type'] == 'exponential' then delay = (2 ^ before) * base else delay = base end
      local jitter = tonumber(backoff['jitter']) or 0
      if jitter > 0 then delay = delay + (tonumber(ARGV[9]) or 0) * jitter * delay end
      delay = math.floor(delay + 0.5)
    end
  end
  if string.find(h[6] or '', '"fallbacks"', 1, true) then redis.call('HINCRBY', jobKey, 'fallbackIndex', 1) end
  local priority = tonumber(h[8]) or 0
  redis.call('ZADD', KEYS[3], priority * PRIORITY_SHIFT + now + delay, jobId)
  redis.call('HSET', jobKey, 'state', 'delayed', 'failedReason', ARGV[3], 'processedOn', ARGV[4])
  emitEvent(KEYS[4], 'retrying', jobId, {'failedReason', ARGV[3], 'attemptsMade', tostring(attemptsMade), 'delay', tostring(delay)})
  return {'retrying', tostring(delay)}
end
redis.call('ZADD', KEYS[2], now, jobId)
redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', ARGV[3], 'finishedOn', ARGV[4], 'processedOn', ARGV[4])
emitEvent(KEYS[4], 'failed', jobId, {'failedReason', ARGV[3]})
recordMetrics(KEYS[6], now, now - processedOn)
local snapshot = {}
if ARGV[11] == '1' then snapshot = redis.call('HGETALL', jobKey) end
applyRetention(KEYS[2], prefix, jobKey, jobId, opts['removeOnFail'], now)
return {'failed', snapshot}
