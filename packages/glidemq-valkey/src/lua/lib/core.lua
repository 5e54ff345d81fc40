-- Switchyard's helpers for glide-mq's key layout: events, metrics, retention, leases, expiry.
-- Every operation script in src/lua runs with the lib/ helpers (core, claim, dependencies, create,
-- complete) prepended (scripts.ts), reproducing the bookkeeping of glide-mq's own functions.

local PRIORITY_SHIFT = 4398046511104

local function emitEvent(eventsKey, eventType, jobId, extra)
  local fields = {'event', eventType, 'jobId', tostring(jobId)}
  if extra then
    for i = 1, #extra do fields[#fields + 1] = extra[i] end
  end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', '1000', '*', unpack(fields))
end

-- Per-minute buckets m:<minute>:c and m:<minute>:d; a zero duration adds no :d field.
-- Buckets older than a day are pruned on every 1000th increment, as glide-mq does. `jobs` (default 1)
-- finished at the same `now` count in one HINCRBY per field (duration: the sum of their positive
-- durations), which leaves the buckets as that many single increments would.
local function recordMetrics(metricsKey, now, duration, jobs)
  jobs = jobs or 1
  local minute = now - (now % 60000)
  local count = redis.call('HINCRBY', metricsKey, 'm:' .. minute .. ':c', jobs)
  if duration > 0 then
    redis.call('HINCRBY', metricsKey, 'm:' .. minute .. ':d', duration)
  end
  if math.floor(count / 1000) > math.floor((count - jobs) / 1000) then
    local cutoff = minute - 86400000
    local stale = {}
    for _, field in ipairs(redis.call('HKEYS', metricsKey)) do
      local ts = tonumber(string.match(field, '^m:(%d+):'))
      if ts and ts < cutoff then stale[#stale + 1] = field end
    end
    for i = 1, #stale, 1000 do
      redis.call('HDEL', metricsKey, unpack(stale, i, math.min(i + 999, #stale)))
    end
  end
end

-- Never lets the counter go negative: a duplicate release must not latch it below zero.
local function decrListActive(listActiveKey)
  local current = tonumber(redis.call('GET', listActiveKey)) or 0
  if current > 0 then redis.call('DECR', listActiveKey) end
end

local function decodeOpts(optsJson)
  if not optsJson or optsJson == '' then return {} end
  local ok, decoded = pcall(cjson.decode, optsJson)
  if ok and type(decoded) == 'table' then return decoded end
  return {}
end

local function ackAndDelete(streamKey, group, entryId)
  if entryId and entryId ~= '' then
    redis.call('XACK', streamKey, group, entryId)
    redis.call('XDEL', streamKey, entryId)
  end
end

-- The stream entry that carries `jobId`, or nil (a list-sourced job has none). A scan of the stream:
-- only for jobs claimed by someone who did not record the entry id (a glide-mq worker).
local function findEntry(streamKey, jobId)
  local cursor = '-'
  while true do
    local entries = redis.call('XRANGE', streamKey, cursor, '+', 'COUNT', 1000)
    if #entries == 0 then return nil end
    for _, entry in ipairs(entries) do
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'jobId' and fields[f + 1] == jobId then return entry[1] end
      end
    end
    cursor = '(' .. entries[#entries][1]
  end
end

local function removeJobs(setKey, prefix, ids)
  for i = 1, #ids do redis.call('UNLINK', prefix .. 'job:' .. ids[i]) end
  for i = 1, #ids, 1000 do
    redis.call('ZREM', setKey, unpack(ids, i, math.min(i + 999, #ids)))
  end
end

local function trimToCount(setKey, prefix, keep)
  local total = redis.call('ZCARD', setKey)
  if keep > 0 and total > keep then
    local excess = redis.call('ZRANGE', setKey, 0, math.min(total - keep, 1000) - 1)
    if #excess > 0 then removeJobs(setKey, prefix, excess) end
  end
end

-- removeOnComplete / removeOnFail as glide-mq reads them from the job's opts:
-- true deletes the job, N keeps the newest N of the whole set, {age, count} does both limits.
local function applyRetention(setKey, prefix, jobKey, jobId, option, now)
  if option == true then
    redis.call('ZREM', setKey, jobId)
    redis.call('UNLINK', jobKey)
  elseif type(option) == 'number' then
    trimToCount(setKey, prefix, option)
  elseif type(option) == 'table' then
    local age = tonumber(option['age']) or 0
    if age > 0 then
      local cutoff = now - age * 1000
      local old = redis.call('ZRANGEBYSCORE', setKey, '0', string.format('%.0f', cutoff), 'LIMIT', 0, 1000)
      if #old > 0 then removeJobs(setKey, prefix, old) end
    end
    trimToCount(setKey, prefix, tonumber(option['count']) or 0)
  end
end

-- Switchyard's lease fields: kept beside the native fields, never in place of one.
local function clearLease(prefix, jobKey, jobId)
  redis.call('HDEL', jobKey, 'syWorker', 'syLeaseUntil', 'syLeaseStart', 'syEntryId')
  redis.call('ZREM', prefix .. 'sy:leases', jobId)
end

-- How long an active job may go without a heartbeat: its own lockDuration when in range, else the
-- worker's lock duration, else the reclaim's minimum idle time.
local function lockThreshold(optsJson, workerLock, minIdle)
  local threshold = tonumber(decodeOpts(optsJson)['lockDuration']) or 0
  if threshold >= 1000 and threshold <= 86400000 then return threshold end
  return workerLock > 0 and workerLock or minIdle
end

-- A stalled job (stream or list sourced) counts one more stall and loses any Switchyard lease, which
-- left behind would still read as held. Past maxStalled it fails for good and true is returned;
-- otherwise it is marked waiting and the caller puts it back where it came from.
local function stallJob(keys, prefix, jobKey, jobId, now, maxStalled, processedOn)
  local stalled = redis.call('HINCRBY', jobKey, 'stalledCount', 1)
  clearLease(prefix, jobKey, jobId)
  if stalled > maxStalled then
    local reason = 'job stalled more than maxStalledCount'
    redis.call('ZADD', keys.failed, now, jobId)
    redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', tostring(now))
    emitEvent(keys.events, 'failed', jobId, {'failedReason', reason})
    recordMetrics(keys.metrics, now, now - (tonumber(processedOn) or now))
    return true
  end
  emitEvent(keys.events, 'stalled', jobId, nil)
  redis.call('HSET', jobKey, 'state', 'waiting')
  redis.call('HDEL', jobKey, 'processedOn', 'lastActive')
  return false
end

local function expireJob(prefix, jobKey, jobId, now)
  if redis.call('HGET', jobKey, 'state') == 'failed' then return end
  local processedOn = tonumber(redis.call('HGET', jobKey, 'processedOn')) or now
  redis.call('ZADD', prefix .. 'failed', now, jobId)
  redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', 'expired', 'finishedOn', tostring(now))
  emitEvent(prefix .. 'events', 'expired', jobId, nil)
  recordMetrics(prefix .. 'metrics:failed', now, now - processedOn)
end

local function isExpired(jobKey, now)
  local expireAt = tonumber(redis.call('HGET', jobKey, 'expireAt'))
  return expireAt ~= nil and expireAt > 0 and now > expireAt
end

-- A job as Switchyard reads it back (toJob in mapping.ts): its flat hash, its `scheduled` score
-- (read only for a delayed job, the one state whose due time comes from it; false otherwise) and
-- its deps members; an empty hash when there is no job (or the key is not a hash).
local function readJob(prefix, scheduledKey, jobId)
  local hash = redis.pcall('HGETALL', prefix .. 'job:' .. jobId)
  if hash.err or #hash == 0 then return {{}, false, {}} end
  local score = false
  for i = 1, #hash, 2 do
    if hash[i] == 'state' then
      if hash[i + 1] == 'delayed' then score = redis.call('ZSCORE', scheduledKey, jobId) end
      break
    end
  end
  return {hash, score, redis.call('SMEMBERS', prefix .. 'deps:' .. jobId)}
end
