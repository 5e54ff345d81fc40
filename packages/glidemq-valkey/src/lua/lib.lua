-- Switchyard helpers for the glide-mq key layout, prepended to every script of this folder.
-- They reproduce the bookkeeping glide-mq's own server functions do (events, metrics, retention,
-- promotion, activation) so both systems leave the same keys behind. Written for Switchyard.

local PRIORITY_SHIFT = 4398046511104

local function emitEvent(eventsKey, eventType, jobId, extra)
  local fields = {'event', eventType, 'jobId', tostring(jobId)}
  if extra then
    for i = 1, #extra do fields[#fields + 1] = extra[i] end
  end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', '1000', '*', unpack(fields))
end

-- Per-minute buckets m:<minute>:c and m:<minute>:d; a zero duration adds no :d field.
-- Buckets older than a day are pruned on every 1000th increment, as glide-mq does.
local function recordMetrics(metricsKey, now, duration)
  local minute = now - (now % 60000)
  local count = redis.call('HINCRBY', metricsKey, 'm:' .. minute .. ':c', 1)
  if duration > 0 then
    redis.call('HINCRBY', metricsKey, 'm:' .. minute .. ':d', duration)
  end
  if count % 1000 == 0 then
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

-- Moves due members of `scheduled` to the priority list (band > 0), the lifo list (lifo=1) or the
-- stream, band by band from the highest priority (lowest band) up; at most `limit` per call.
local function promoteDue(prefix, now, limit)
  local scheduledKey = prefix .. 'scheduled'
  local count = 0
  local cursor = 0
  while count < limit do
    local first = redis.call('ZRANGEBYSCORE', scheduledKey, string.format('%.0f', cursor), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #first == 0 then break end
    local band = math.floor((tonumber(first[2]) or 0) / PRIORITY_SHIFT)
    local low = band * PRIORITY_SHIFT
    local due = redis.call('ZRANGEBYSCORE', scheduledKey, string.format('%.0f', low), string.format('%.0f', low + now),
      'LIMIT', 0, limit - count)
    for i = 1, #due do
      local member = due[i]
      local jobId = member
      local retryGroup = nil
      local sepStart, sepEnd = string.find(member, '||', 1, true)
      if sepStart then
        jobId = string.sub(member, 1, sepStart - 1)
        retryGroup = string.sub(member, sepEnd + 1)
        if retryGroup == '' then retryGroup = nil end
      end
      local jobKey = prefix .. 'job:' .. jobId
      redis.call('ZREM', scheduledKey, member)
      count = count + 1
      if isExpired(jobKey, now) then
        expireJob(prefix, jobKey, jobId, now)
      else
        if redis.call('HGET', jobKey, 'lifo') == '1' then
          redis.call('RPUSH', prefix .. 'lifo', jobId)
        elseif band > 0 then
          redis.call('LPUSH', prefix .. 'priority', jobId)
        else
          local name = redis.call('HGET', jobKey, 'name') or ''
          if retryGroup then
            redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', name, 'retryGroup', retryGroup)
          else
            redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', name)
          end
        end
        redis.call('HSET', jobKey, 'state', 'waiting')
        emitEvent(prefix .. 'events', 'promoted', jobId, nil)
      end
    end
    cursor = (band + 1) * PRIORITY_SHIFT
  end
  return count
end

-- ctx: prefix, now, group, consumer, leaseWorker, leaseUntil, activeEvents (list jobs only, as
-- glide-mq's completeAndFetchNext does). Returns the job's flat hash, or nil when it was skipped
-- (gone, revoked or expired; its stream entry is then acknowledged and deleted).
local function activateJob(ctx, jobId, entryId, fromList)
  local prefix = ctx.prefix
  local jobKey = prefix .. 'job:' .. jobId
  local streamKey = prefix .. 'stream'
  -- One HGETALL; the activation fields are then patched into the reply, as glidemq_moveToActive does.
  local hash = redis.call('HGETALL', jobKey)
  if #hash == 0 then
    ackAndDelete(streamKey, ctx.group, entryId)
    return nil
  end
  local state, revoked, expireAt, at = nil, nil, nil, {}
  for i = 1, #hash, 2 do
    local field = hash[i]
    if field == 'state' then state = hash[i + 1] at.state = i + 1
    elseif field == 'revoked' then revoked = hash[i + 1]
    elseif field == 'expireAt' then expireAt = tonumber(hash[i + 1])
    elseif field == 'processedOn' then at.processedOn = i + 1
    elseif field == 'lastActive' then at.lastActive = i + 1
    end
  end
  if revoked == '1' then
    ackAndDelete(streamKey, ctx.group, entryId)
    if state ~= 'failed' then
      redis.call('ZADD', prefix .. 'failed', ctx.now, jobId)
      redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', 'revoked', 'finishedOn', tostring(ctx.now))
      emitEvent(prefix .. 'events', 'failed', jobId, {'failedReason', 'revoked'})
    end
    return nil
  end
  if expireAt and expireAt > 0 and ctx.now > expireAt then
    expireJob(prefix, jobKey, jobId, ctx.now)
    ackAndDelete(streamKey, ctx.group, entryId)
    return nil
  end
  local nowStr = tostring(ctx.now)
  redis.call('HSET', jobKey, 'state', 'active', 'processedOn', nowStr, 'lastActive', nowStr)
  for _, field in ipairs({'state', 'processedOn', 'lastActive'}) do
    local value = field == 'state' and 'active' or nowStr
    if at[field] then
      hash[at[field]] = value
    else
      hash[#hash + 1] = field
      hash[#hash + 1] = value
    end
  end
  if ctx.leaseWorker ~= '' then
    redis.call('HSET', jobKey, 'syWorker', ctx.leaseWorker, 'syLeaseUntil', ctx.leaseUntil, 'syLeaseStart', nowStr,
      'syEntryId', entryId)
    redis.call('ZADD', prefix .. 'sy:leases', ctx.leaseUntil, jobId)
    hash = redis.call('HGETALL', jobKey)
  end
  if fromList then
    if ctx.activeEvents then emitEvent(prefix .. 'events', 'active', jobId, nil) end
    redis.call('INCR', prefix .. 'list-active')
  end
  return hash
end

-- The claim order of a glide-mq worker: the priority list, then the lifo list, then the stream
-- through the `workers` consumer group (created from id 0 when missing). Appends {id, entryId, hash}.
local function fetchJobs(ctx, count, out)
  local lists = {ctx.prefix .. 'priority', ctx.prefix .. 'lifo'}
  -- One EXISTS spares two empty RPOPs on the hot path of a queue that uses neither list.
  local listed = redis.call('EXISTS', lists[1], lists[2]) > 0
  for l = 1, (listed and 2 or 0) do
    local tries = 0
    while #out < count and tries < count + 3 do
      local jobId = redis.call('RPOP', lists[l])
      if not jobId then break end
      local hash = activateJob(ctx, jobId, '', true)
      if hash then out[#out + 1] = {jobId, '', hash} else tries = tries + 1 end
    end
  end
  local streamKey = ctx.prefix .. 'stream'
  for _ = 1, 3 do
    if #out >= count then break end
    local read = redis.pcall('XREADGROUP', 'GROUP', ctx.group, ctx.consumer, 'COUNT', count - #out, 'STREAMS', streamKey, '>')
    if type(read) == 'table' and read.err then
      redis.call('XGROUP', 'CREATE', streamKey, ctx.group, '0', 'MKSTREAM')
      read = redis.call('XREADGROUP', 'GROUP', ctx.group, ctx.consumer, 'COUNT', count - #out, 'STREAMS', streamKey, '>')
    end
    if not read or not read[1] or #read[1][2] == 0 then break end
    for _, entry in ipairs(read[1][2]) do
      local jobId = nil
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'jobId' then jobId = fields[f + 1] break end
      end
      if jobId then
        local hash = activateJob(ctx, jobId, entry[1], false)
        if hash then out[#out + 1] = {jobId, entry[1], hash} end
      else
        ackAndDelete(streamKey, ctx.group, entry[1])
      end
    end
  end
  return out
end

-- One dependency done: depdone:<member> (once), depsCompleted+1, and the dependent job queued
-- once every dependency is done, with the `active` event glide-mq writes for a released parent.
local function markDependencyDone(prefix, parentId, member)
  local parentKey = prefix .. 'job:' .. parentId
  if redis.call('HSETNX', parentKey, 'depdone:' .. member, '1') == 0 then return end
  local done = redis.call('HINCRBY', parentKey, 'depsCompleted', 1)
  local total = redis.call('SCARD', prefix .. 'deps:' .. parentId)
  if total - done <= 0 and redis.call('HGET', parentKey, 'state') == 'waiting-children' then
    redis.call('HSET', parentKey, 'state', 'waiting')
    redis.call('ZREM', prefix .. 'sy:blocked', parentId)
    redis.call('XADD', prefix .. 'stream', '*', 'jobId', parentId, 'name', redis.call('HGET', parentKey, 'name') or '')
    emitEvent(prefix .. 'events', 'active', parentId, nil)
  end
end

-- A finished job tells the jobs that wait on it in the same queue: its flow parent (parentId) and
-- its DAG parents (the `parents:<id>` set, members "<queuePrefix>:<parentId>").
-- `parentId` is the job's field when the caller has read it already (false: none), nil to read it here.
local function notifyParent(prefix, jobKey, jobId, parentId)
  local queuePrefix = string.sub(prefix, 1, #prefix - 1)
  local member = queuePrefix .. ':' .. jobId
  local parent = {false, false}
  if parentId == nil or parentId then parent = redis.call('HMGET', jobKey, 'parentId', 'parentQueue') end
  if parent[1] and parent[1] ~= '' then
    local tag = '{' .. (parent[2] or '') .. '}'
    if not parent[2] or parent[2] == '' or string.sub(queuePrefix, -#tag) == tag then
      markDependencyDone(prefix, parent[1], member)
    end
  end
  for _, entry in ipairs(redis.call('SMEMBERS', prefix .. 'parents:' .. jobId)) do
    local sep = string.find(entry, ':[^:]+$')
    if sep and string.sub(entry, 1, sep - 1) == queuePrefix then
      markDependencyDone(prefix, string.sub(entry, sep + 1), member)
    end
  end
end

-- Makes job `jobId` (already written, state waiting-children) wait on `deps`, in glide-mq's DAG
-- layout: deps:<jobId> holds "<queuePrefix>:<depId>", parents:<depId> holds "<queuePrefix>:<jobId>".
-- Returns true when every dependency had already completed.
local function registerDependencies(prefix, jobId, deps)
  local queuePrefix = string.sub(prefix, 1, #prefix - 1)
  local jobKey = prefix .. 'job:' .. jobId
  local done = 0
  for _, depId in ipairs(deps) do
    local member = queuePrefix .. ':' .. depId
    redis.call('SADD', prefix .. 'deps:' .. jobId, member)
    redis.call('SADD', prefix .. 'parents:' .. depId, queuePrefix .. ':' .. jobId)
    if redis.call('HGET', prefix .. 'job:' .. depId, 'state') == 'completed' then
      redis.call('HSET', jobKey, 'depdone:' .. member, '1')
      done = done + 1
    end
  end
  if done > 0 then redis.call('HSET', jobKey, 'depsCompleted', tostring(done)) end
  return done >= redis.call('SCARD', prefix .. 'deps:' .. jobId)
end

-- Job creation for add.lua. args: name, data, opts, timestamp, delay, priority, maxAttempts, ttl,
-- customId, lifo, skipEvents, extraFieldsJson, (dedup x3), dependsOnJson ('' = none).
local function createJob(prefix, idKey, a)
  local timestamp = tonumber(a[4])
  local delay = tonumber(a[5]) or 0
  local priority = tonumber(a[6]) or 0
  local ttl = tonumber(a[8]) or 0
  local customId = a[9] or ''
  local lifo = tonumber(a[10]) or 0
  local jobId
  if customId ~= '' then
    if redis.call('EXISTS', prefix .. 'job:' .. customId) == 1 then return nil, customId end
    jobId = customId
    if string.match(customId, '^%d+$') then
      local numeric = tonumber(customId)
      if numeric > 0 and numeric > (tonumber(redis.call('GET', idKey)) or 0) then redis.call('SET', idKey, customId) end
    end
  else
    jobId = tostring(redis.call('INCR', idKey))
  end
  local jobKey = prefix .. 'job:' .. jobId
  local fields = {
    'id', jobId, 'name', a[1], 'data', a[2], 'opts', a[3], 'timestamp', tostring(timestamp),
    'attemptsMade', '0', 'delay', tostring(delay), 'priority', tostring(priority), 'maxAttempts', tostring(tonumber(a[7]) or 0)
  }
  if ttl > 0 then
    fields[#fields + 1] = 'expireAt'
    fields[#fields + 1] = tostring(timestamp + ttl)
  end
  if lifo > 0 then
    fields[#fields + 1] = 'lifo'
    fields[#fields + 1] = '1'
  end
  local deps = {}
  if a[16] and a[16] ~= '' then deps = cjson.decode(a[16]) end
  fields[#fields + 1] = 'state'
  if #deps > 0 then
    fields[#fields + 1] = 'waiting-children'
  elseif delay > 0 then
    fields[#fields + 1] = 'delayed'
  elseif priority > 0 then
    fields[#fields + 1] = 'prioritized'
  else
    fields[#fields + 1] = 'waiting'
  end
  if a[12] and a[12] ~= '' then
    for field, value in pairs(cjson.decode(a[12])) do
      fields[#fields + 1] = field
      fields[#fields + 1] = tostring(value)
    end
  end
  redis.call('HSET', jobKey, unpack(fields))
  if #deps > 0 then
    if registerDependencies(prefix, jobId, deps) then
      redis.call('HSET', jobKey, 'state', 'waiting')
      redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', a[1])
    else
      redis.call('ZADD', prefix .. 'sy:blocked', timestamp, jobId)
    end
  elseif delay > 0 then
    redis.call('ZADD', prefix .. 'scheduled', priority * PRIORITY_SHIFT + timestamp + delay, jobId)
  elseif priority > 0 then
    redis.call('ZADD', prefix .. 'scheduled', priority * PRIORITY_SHIFT, jobId)
  elseif lifo > 0 then
    redis.call('RPUSH', prefix .. 'lifo', jobId)
  else
    redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', a[1])
  end
  if a[11] ~= '1' then emitEvent(prefix .. 'events', 'added', jobId, {'name', a[1]}) end
  return jobId, nil
end
