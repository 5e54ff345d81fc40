-- Writes one migrated job as it was (ids, timestamps, attempts kept) unless the id exists.
-- KEYS: job, id, stream, scheduled, completed, failed, dedup
-- ARGV: jobId, route (stream|priority|lifo|scheduled|completed|failed|blocked), score, name, flatFieldsJson,
--       dependsOnJson (route blocked: the ids it waits for), dedupId ('' = none), createdAt
-- A unique key becomes the job's dedup record "<id>:<createdAt>", unless a live job already holds it.
-- Returns 1 when written, 0 when the id already existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = cjson.decode(ARGV[5])
local flat = {}
for i = 1, #fields do flat[#flat + 1] = fields[i] end
redis.call('HSET', KEYS[1], unpack(flat))
local jobId = ARGV[1]
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #('job:' .. jobId))
if string.match(jobId, '^%d+$') and tonumber(jobId) > (tonumber(redis.call('GET', KEYS[2])) or 0) then
  redis.call('SET', KEYS[2], jobId)
end
local route = ARGV[2]
if route == 'stream' then
  redis.call('XADD', KEYS[3], '*', 'jobId', jobId, 'name', ARGV[4])
elseif route == 'priority' then
  redis.call('LPUSH', prefix .. 'priority', jobId)
elseif route == 'lifo' then
  redis.call('RPUSH', prefix .. 'lifo', jobId)
elseif route == 'scheduled' then
  redis.call('ZADD', KEYS[4], ARGV[3], jobId)
elseif route == 'completed' then
  redis.call('ZADD', KEYS[5], ARGV[3], jobId)
elseif route == 'failed' then
  redis.call('ZADD', KEYS[6], ARGV[3], jobId)
elseif route == 'blocked' then
  if registerDependencies(prefix, jobId, cjson.decode(ARGV[6])) then
    redis.call('HSET', KEYS[1], 'state', 'waiting')
    redis.call('XADD', KEYS[3], '*', 'jobId', jobId, 'name', ARGV[4])
  else
    redis.call('ZADD', prefix .. 'sy:blocked', ARGV[3], jobId)
  end
end
if ARGV[7] ~= '' then
  local held = redis.call('HGET', KEYS[7], ARGV[7])
  local holder = held and string.sub(held, 1, (string.find(held, ':', 1, true) or 0) - 1)
  local state = holder and redis.call('HGET', prefix .. 'job:' .. holder, 'state')
  if not state or state == 'completed' or state == 'failed' then
    redis.call('HSET', KEYS[7], ARGV[7], jobId .. ':' .. ARGV[8])
  end
end
return 1
