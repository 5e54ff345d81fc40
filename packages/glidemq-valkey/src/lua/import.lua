-- Writes a page of migrated jobs as they were (ids, timestamps, attempts kept), in order, each unless
-- its id exists, and answers what the queue then holds, so the caller checks the page without a
-- second round trip.
-- KEYS: id, stream, scheduled, completed, failed, dedup
-- ARGV: 8 per job: jobId, route (stream|priority|lifo|scheduled|completed|failed|blocked), score, name,
--       flatFieldsJson, dependsOnJson (route blocked: the ids it waits for), dedupId ('' = none), createdAt
-- A unique key becomes the job's dedup record "<id>:<createdAt>", unless a live job already holds it.
-- Returns per job {1} when it was written as given (its hash is the fields given, its score the one
-- given), {1, 'waiting'} when a blocked job whose dependencies are done was written waiting, or {0,
-- then the job the id names, as readJob (lib/core.lua) reads it: flat hash, `scheduled` score of a
-- delayed job or false, deps members}. Reading back and encoding every written job cost as much as writing it.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 2)
local highestId = tonumber(redis.call('GET', KEYS[1])) or 0

-- Answers 1 (and the state it was stored in, when not the one given) or 0 when the id exists.
local function importJob(jobKey, jobId, route, score, name, fieldsJson, dependsOnJson, dedupId, createdAt)
  if redis.call('EXISTS', jobKey) == 1 then return 0 end
  local stateNow = nil
  redis.call('HSET', jobKey, unpack(cjson.decode(fieldsJson)))
  if string.match(jobId, '^%d+$') and tonumber(jobId) > highestId then
    highestId = tonumber(jobId)
    redis.call('SET', KEYS[1], jobId)
  end
  if route == 'stream' then
    redis.call('XADD', KEYS[2], '*', 'jobId', jobId, 'name', name)
  elseif route == 'priority' then
    redis.call('LPUSH', prefix .. 'priority', jobId)
  elseif route == 'lifo' then
    redis.call('RPUSH', prefix .. 'lifo', jobId)
  elseif route == 'scheduled' then
    redis.call('ZADD', KEYS[3], score, jobId)
  elseif route == 'completed' then
    redis.call('ZADD', KEYS[4], score, jobId)
  elseif route == 'failed' then
    redis.call('ZADD', KEYS[5], score, jobId)
  elseif route == 'blocked' then
    if registerDependencies(prefix, jobId, cjson.decode(dependsOnJson)) then
      redis.call('HSET', jobKey, 'state', 'waiting')
      redis.call('XADD', KEYS[2], '*', 'jobId', jobId, 'name', name)
      stateNow = 'waiting'
    else
      redis.call('ZADD', prefix .. 'sy:blocked', score, jobId)
    end
  end
  if dedupId ~= '' then
    local held = redis.call('HGET', KEYS[6], dedupId)
    local holder = held and string.sub(held, 1, (string.find(held, ':', 1, true) or 0) - 1)
    local state = holder and redis.call('HGET', prefix .. 'job:' .. holder, 'state')
    if not state or state == 'completed' or state == 'failed' then
      redis.call('HSET', KEYS[6], dedupId, jobId .. ':' .. createdAt)
    end
  end
  return 1, stateNow
end

local results = {}
for offset = 0, #ARGV - 1, 8 do
  local jobId = ARGV[offset + 1]
  local jobKey = prefix .. 'job:' .. jobId
  local written, stateNow = importJob(jobKey, jobId, ARGV[offset + 2], ARGV[offset + 3], ARGV[offset + 4],
    ARGV[offset + 5], ARGV[offset + 6], ARGV[offset + 7], ARGV[offset + 8])
  if written == 1 then
    results[#results + 1] = {1, stateNow}
  else
    local stored = readJob(prefix, KEYS[3], jobId)
    results[#results + 1] = {0, stored[1], stored[2], stored[3]}
  end
end
return results
