-- Adds jobs exactly as glidemq_addJob (and, with a dedup id, glidemq_dedup) does; several jobs in
-- one call are added atomically, in order (bulk enqueue).
-- KEYS: id, stream, scheduled, events, lifo, priority, dedup
-- ARGV: 16 per job: name, data, opts, timestamp, delay, priority, maxAttempts, ttl, customId, lifo,
--       skipEvents, extraFieldsJson, dedupId ('' = none), dedupTtlMs, dedupMode (simple|throttle|debounce),
--       dependsOnJson ('' = none: a JSON array of job ids of this queue)
-- Returns per job {'created', id} for a job created without dependencies (the caller knows what was
-- written: producer.ts's createdSnapshot), else {'created', id, …} | {'skipped', existingId, …} |
-- {'duplicate', id, …}, followed by the job as it now is (readJob in lib/core.lua: flat hash,
-- `scheduled` score of a delayed job or false, deps members), so the caller needs no second round trip
-- to read it back; or {{'missing', depId}} (and writes nothing) when a dependency neither exists nor
-- is an earlier job of the batch. Reading back and returning every new hash cost a bulk add about
-- half of its time in Redis.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 2)
local dedupKey = KEYS[7]

-- nil when the job may be created, else the id of the live job that makes it a duplicate.
local function dedupBlocks(a)
  local existing = redis.call('HGET', dedupKey, a[13])
  if not existing then return nil end
  local sep = string.find(existing, ':', 1, true)
  if not sep then return nil end
  local existingId = string.sub(existing, 1, sep - 1)
  local existingKey = prefix .. 'job:' .. existingId
  local state = redis.call('HGET', existingKey, 'state')
  local mode = a[15]
  if mode == 'throttle' then
    local ttl = tonumber(a[14]) or 0
    local storedAt = tonumber(string.sub(existing, sep + 1))
    if ttl > 0 and storedAt and tonumber(a[4]) - storedAt < ttl then return existingId end
    return nil
  end
  if mode == 'debounce' and (state == 'delayed' or state == 'prioritized') then
    redis.call('ZREM', prefix .. 'scheduled', existingId)
    redis.call('UNLINK', existingKey)
    if a[11] ~= '1' then emitEvent(prefix .. 'events', 'removed', existingId, nil) end
    return nil
  end
  if state and state ~= 'completed' and state ~= 'failed' then return existingId end
  return nil
end

local PER_JOB = 16
-- A dependency must exist already or be an earlier job of this batch (by its custom id), as it
-- would for the same jobs added one by one.
local earlierIds = {}
for offset = 0, #ARGV - 1, PER_JOB do
  local depsJson = ARGV[offset + 16]
  if depsJson and depsJson ~= '' then
    for _, depId in ipairs(cjson.decode(depsJson)) do
      if not earlierIds[depId] and redis.call('EXISTS', prefix .. 'job:' .. depId) == 0 then return {{'missing', depId}} end
    end
  end
  if ARGV[offset + 9] ~= '' then earlierIds[ARGV[offset + 9]] = true end
end

local function snapshot(status, jobId)
  local stored = readJob(prefix, KEYS[3], jobId)
  return {status, jobId, stored[1], stored[2], stored[3]}
end

-- When no job of the call has a custom id or a dedup id, every one is created and takes the next id:
-- one INCRBY takes them all, leaving the counter and the ids as one INCR per job would.
local firstId = nil
local jobCount = #ARGV / PER_JOB
if jobCount > 1 then
  firstId = 1
  for offset = 0, #ARGV - 1, PER_JOB do
    if ARGV[offset + 9] ~= '' or ARGV[offset + 13] ~= '' then firstId = nil break end
  end
  if firstId then firstId = redis.call('INCRBY', KEYS[1], jobCount) - jobCount + 1 end
end

local results = {}
for offset = 0, #ARGV - 1, PER_JOB do
  local a = {}
  for i = 1, PER_JOB do a[i] = ARGV[offset + i] end
  local blocker = nil
  if a[13] ~= '' then blocker = dedupBlocks(a) end
  if blocker then
    results[#results + 1] = snapshot('skipped', blocker)
  else
    local jobId, duplicate = createJob(prefix, KEYS[1], a, firstId and tostring(firstId + offset / PER_JOB))
    if not jobId then
      results[#results + 1] = snapshot('duplicate', duplicate)
    else
      if a[13] ~= '' then redis.call('HSET', dedupKey, a[13], jobId .. ':' .. a[4]) end
      if a[16] == '' then results[#results + 1] = {'created', jobId} else results[#results + 1] = snapshot('created', jobId) end
    end
  end
end
return results
