-- Dependencies in glide-mq's flow/DAG layout.

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
-- `parentId` is the job's field when the caller has read it already (false: none), nil to read it here;
-- `hasParents` false when the caller knows there is no `parents:<id>` set (nil: look).
local function notifyParent(prefix, jobKey, jobId, parentId, hasParents)
  local queuePrefix = string.sub(prefix, 1, #prefix - 1)
  local member = queuePrefix .. ':' .. jobId
  local parent = {false, false}
  if parentId == nil or parentId then parent = redis.call('HMGET', jobKey, 'parentId', 'parentQueue') end
  if parent[1] and parent[1] ~= '' then
    local tag = '{' .. (parent[2] or '') .. '}'
    if not parent[2] or parent[2] == '' or string.sub(queuePrefix, -#tag) == tag then
      markDependencyDone(prefix, parent[1], member)
    else
      -- A parent in another queue (a cross-queue flow), as glide-mq's complete releases it with the
      -- parent queue's keys. A standalone server reaches them; a cluster refuses keys of another
      -- slot, and then the parent is left as glide-mq leaves it there.
      local parentPrefix = (string.gsub(queuePrefix, '{[^{}]*}$', function() return tag end)) .. ':'
      local reachable = redis.pcall('EXISTS', parentPrefix .. 'job:' .. parent[1])
      if reachable == 1 then markDependencyDone(parentPrefix, parent[1], member) end
    end
  end
  if hasParents == false then return end
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
