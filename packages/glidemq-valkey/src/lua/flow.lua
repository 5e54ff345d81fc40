-- A parent and its children in one queue, as glidemq_addFlow does for same-queue flows: the parent
-- waits in `waiting-children` with deps:<parent> = {"<queuePrefix>:<childId>"}, each child carries
-- parentId/parentQueue, the children's `added` events come before the parent's.
-- KEYS: id, stream, scheduled, events
-- ARGV: parent name, data, opts, timestamp, delay, priority, maxAttempts, ttl, customId, queueName,
--       then the 16 add.lua arguments of each child (extraFieldsJson is filled in here)
-- Returns {parentId, childId...} | {'duplicate'}
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 2)
local queuePrefix = string.sub(prefix, 1, #prefix - 1)
local timestamp = tonumber(ARGV[4])
local PARENT_ARGS, CHILD_ARGS = 10, 16
for offset = PARENT_ARGS, #ARGV - 1, CHILD_ARGS do
  local customId = ARGV[offset + 9]
  if customId ~= '' and redis.call('EXISTS', prefix .. 'job:' .. customId) == 1 then return {'duplicate'} end
end
local parentId = ARGV[9]
if parentId ~= '' then
  if redis.call('EXISTS', prefix .. 'job:' .. parentId) == 1 then return {'duplicate'} end
  if string.match(parentId, '^%d+$') and tonumber(parentId) > (tonumber(redis.call('GET', KEYS[1])) or 0) then
    redis.call('SET', KEYS[1], parentId)
  end
else
  parentId = tostring(redis.call('INCR', KEYS[1]))
end
local parentKey = prefix .. 'job:' .. parentId
local fields = {
  'id', parentId, 'name', ARGV[1], 'data', ARGV[2], 'opts', ARGV[3], 'timestamp', ARGV[4], 'attemptsMade', '0',
  'delay', ARGV[5], 'priority', ARGV[6], 'maxAttempts', ARGV[7], 'state', 'waiting-children'
}
local ttl = tonumber(ARGV[8]) or 0
if ttl > 0 then
  fields[#fields + 1] = 'expireAt'
  fields[#fields + 1] = tostring(timestamp + ttl)
end
redis.call('HSET', parentKey, unpack(fields))
local result = {parentId}
for offset = PARENT_ARGS, #ARGV - 1, CHILD_ARGS do
  local a = {}
  for i = 1, CHILD_ARGS do a[i] = ARGV[offset + i] end
  a[12] = cjson.encode({parentId = parentId, parentQueue = ARGV[10]})
  local childId = createJob(prefix, KEYS[1], a)
  redis.call('SADD', prefix .. 'deps:' .. parentId, queuePrefix .. ':' .. childId)
  result[#result + 1] = childId
end
emitEvent(KEYS[4], 'added', parentId, {'name', ARGV[1]})
return result
