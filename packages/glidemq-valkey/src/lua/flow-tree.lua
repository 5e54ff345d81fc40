-- A whole FlowProducer.add tree in one call: nested sub-flows and children in other queues, with the
-- ids, hashes, deps sets and events glide-mq's FlowProducer writes (sub-flows first, bottom-up; each
-- level as glidemq_addFlow: parent id, children, the parent's `added` event last), then the proxy's
-- flow record (`<prefix>:{flow:<rootId>}:meta|jobs|roots`, `flowId` on every job). Keys of several
-- queues: a standalone server only (the caller refuses a cluster).
-- KEYS: the root queue's id key (routes the call)
-- ARGV[1]: JSON {groups = [{p = node, leaves = [node...], subs = [group...]}...] in write order,
--          recordPrefix, createdAt}; node and group numbers are 1-based
-- ARGV[2...]: per node, queuePrefix ('glide:{q}'), queueName, then the 16 add.lua arguments
-- Returns {'OK', id of node 1, id of node 2, ...} | {'duplicate', id}
local plan = cjson.decode(ARGV[1])
local NODE_ARGS = 18
local function nodeArg(n, i) return ARGV[1 + (n - 1) * NODE_ARGS + i] end
local nodeCount = (#ARGV - 1) / NODE_ARGS

-- Every custom id is checked before the first write, so a refused flow leaves nothing behind.
local seen = {}
for n = 1, nodeCount do
  local customId = nodeArg(n, 11)
  if customId ~= '' then
    local jobKey = nodeArg(n, 1) .. ':job:' .. customId
    if seen[jobKey] or redis.call('EXISTS', jobKey) == 1 then return {'duplicate', customId} end
    seen[jobKey] = true
  end
end

local ids = {}
local function args(n)
  local a = {}
  for i = 1, 16 do a[i] = nodeArg(n, i + 2) end
  return a
end

-- A parent as glidemq_addFlow writes it (lib/create.lua).
local function writeParent(n)
  return createWaitingParent(nodeArg(n, 1) .. ':', args(n))
end

for g, group in ipairs(plan.groups) do
  local p = group.p
  local prefix = nodeArg(p, 1) .. ':'
  if #group.leaves == 0 and #group.subs == 0 then
    ids[p] = createJob(prefix, prefix .. 'id', args(p))
  else
    local parentId = writeParent(p)
    ids[p] = parentId
    local parentLink = cjson.encode({parentId = parentId, parentQueue = nodeArg(p, 2)})
    local depsKey = prefix .. 'deps:' .. parentId
    for _, c in ipairs(group.leaves) do
      local a = args(c)
      a[12] = parentLink
      ids[c] = createJob(nodeArg(c, 1) .. ':', nodeArg(c, 1) .. ':id', a)
      redis.call('SADD', depsKey, nodeArg(c, 1) .. ':' .. ids[c])
    end
    for _, s in ipairs(group.subs) do
      local sub = plan.groups[s].p
      redis.call('SADD', depsKey, nodeArg(sub, 1) .. ':' .. ids[sub])
    end
    emitEvent(prefix .. 'events', 'added', parentId, {'name', nodeArg(p, 3)})
    -- A sub-flow's parent learns its own parent after this level is written, as FlowProducer does.
    for _, s in ipairs(group.subs) do
      local sub = plan.groups[s].p
      redis.call('HSET', nodeArg(sub, 1) .. ':job:' .. ids[sub], 'parentId', parentId, 'parentQueue', nodeArg(p, 2))
    end
  end
end

-- The proxy's flow record; the flow is named after its root job.
local root = plan.groups[#plan.groups].p
local flowId = ids[root]
local recordBase = plan.recordPrefix .. ':{flow:' .. flowId .. '}:'
redis.call('HSET', recordBase .. 'meta', 'createdAt', tostring(plan.createdAt), 'kind', 'tree')
redis.call('UNLINK', recordBase .. 'jobs', recordBase .. 'roots')
local result = {'OK'}
for n = 1, nodeCount do
  redis.call('SADD', recordBase .. 'jobs', nodeArg(n, 2) .. ':' .. ids[n])
  redis.call('HSET', nodeArg(n, 1) .. ':job:' .. ids[n], 'flowId', flowId)
  result[#result + 1] = ids[n]
end
redis.call('SADD', recordBase .. 'roots', nodeArg(root, 2) .. ':' .. flowId)
return result
