-- Creating a job as glidemq_addJob does.

-- The text tostring(tonumber(text) or default) gives: `text` itself when it is that already (at most
-- 14 digits, no leading zero, as producer.ts sends times and counts), sparing Lua a number-to-text
-- conversion, which costs about as much as a small command.
local function numberText(text, default)
  local size = #text
  if size > 0 and size <= 14 and not string.find(text, '%D') and (size == 1 or string.byte(text) ~= 48) then return text end
  return tostring(tonumber(text) or default)
end

-- Job creation for add.lua. args: name, data, opts, timestamp, delay, priority, maxAttempts, ttl,
-- customId, lifo, skipEvents, extraFieldsJson, (dedup x3), dependsOnJson ('' = none). `takenId`: the
-- id the caller took from the counter already for a job without a custom id (nil: INCR it here).
local function createJob(prefix, idKey, a, takenId)
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
    jobId = takenId or tostring(redis.call('INCR', idKey))
  end
  local jobKey = prefix .. 'job:' .. jobId
  local fields = {
    'id', jobId, 'name', a[1], 'data', a[2], 'opts', a[3], 'timestamp', numberText(a[4], nil),
    'attemptsMade', '0', 'delay', numberText(a[5], 0), 'priority', numberText(a[6], 0), 'maxAttempts', numberText(a[7], 0)
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

-- A flow parent as glidemq_addFlow writes it: state waiting-children, no stream entry; a custom id
-- moves the queue's id counter past it. args as createJob's. Indexed in sy:blocked so that counts
-- see the parent at once. Returns its id.
local function createWaitingParent(prefix, a)
  local jobId = a[9]
  if jobId ~= '' then
    if string.match(jobId, '^%d+$') and tonumber(jobId) > (tonumber(redis.call('GET', prefix .. 'id')) or 0) then
      redis.call('SET', prefix .. 'id', jobId)
    end
  else
    jobId = tostring(redis.call('INCR', prefix .. 'id'))
  end
  local fields = {
    'id', jobId, 'name', a[1], 'data', a[2], 'opts', a[3], 'timestamp', a[4], 'attemptsMade', '0',
    'delay', a[5], 'priority', a[6], 'maxAttempts', a[7], 'state', 'waiting-children'
  }
  local ttl = tonumber(a[8]) or 0
  if ttl > 0 then
    fields[#fields + 1] = 'expireAt'
    fields[#fields + 1] = tostring(tonumber(a[4]) + ttl)
  end
  redis.call('HSET', prefix .. 'job:' .. jobId, unpack(fields))
  redis.call('ZADD', prefix .. 'sy:blocked', tonumber(a[4]) or 0, jobId)
  return jobId
end
