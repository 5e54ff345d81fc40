-- A whole FlowProducer.addDAG graph in one call, as addDAG leaves it once its phases are done: a node
-- with deps is a parent waiting on them (state waiting-children, as glidemq_addFlow writes a parent
-- with no children), a node without is a job as glidemq_addJob writes it; a leaf with one dependent
-- carries it as parentId/parentQueue, and any other node with dependents lists them in parentIds /
-- parentQueues and its `parents:<id>` set, each dependent's `deps:<id>` set naming it. Then the
-- proxy's flow record (`<prefix>:{flow:<flowId>}:meta|jobs|roots`, `flowId` on every job). Keys of
-- several queues: a standalone server only (the caller refuses a cluster).
-- KEYS: the first node's queue id key (routes the call)
-- ARGV[1]: JSON {steps = [{n, parent, piggy, register = [n...]}...] in addDAG's write order (the
--          deepest level first), roots = [n...], recordPrefix, flowId, createdAt}; nodes 1-based
-- ARGV[2...]: per node, queuePrefix ('glide:{q}'), queueName, then the 16 add.lua arguments
-- Returns {'OK', id of node 1, id of node 2, ...} | {'duplicate', id}
local plan = cjson.decode(ARGV[1])
local NODE_ARGS = 18
local function nodeArg(n, i) return ARGV[1 + (n - 1) * NODE_ARGS + i] end
local nodeCount = (#ARGV - 1) / NODE_ARGS

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
local function member(n) return nodeArg(n, 1) .. ':' .. ids[n] end
local function depsKey(n) return nodeArg(n, 1) .. ':deps:' .. ids[n] end
-- cjson writes '/' as '\/'; JSON.stringify, which glide-mq uses for these arrays, does not.
local function json(list) return (string.gsub(cjson.encode(list), '\\/', '/')) end

-- A node with deps, as glidemq_addFlow writes a parent (here with no children yet, lib/create.lua).
local function writeParent(n)
  local prefix = nodeArg(n, 1) .. ':'
  local a = args(n)
  local jobId = createWaitingParent(prefix, a)
  emitEvent(prefix .. 'events', 'added', jobId, {'name', a[1]})
  return jobId
end

for _, step in ipairs(plan.steps) do
  local n = step.n
  if step.parent then
    ids[n] = writeParent(n)
  else
    local a = args(n)
    if step.piggy > 0 then a[12] = cjson.encode({parentId = ids[step.piggy], parentQueue = nodeArg(step.piggy, 2)}) end
    ids[n] = createJob(nodeArg(n, 1) .. ':', nodeArg(n, 1) .. ':id', a)
    if step.piggy > 0 then redis.call('SADD', depsKey(step.piggy), member(n)) end
  end
  if #step.register > 0 then
    local parentIds, parentQueues = {}, {}
    for i, k in ipairs(step.register) do
      parentIds[i] = ids[k]
      parentQueues[i] = nodeArg(k, 2)
    end
    redis.call('HSET', nodeArg(n, 1) .. ':job:' .. ids[n], 'parentIds', json(parentIds), 'parentQueues', json(parentQueues))
    for _, k in ipairs(step.register) do
      redis.call('SADD', nodeArg(n, 1) .. ':parents:' .. ids[n], member(k))
      redis.call('SADD', depsKey(k), member(n))
    end
  end
end

local recordBase = plan.recordPrefix .. ':{flow:' .. plan.flowId .. '}:'
redis.call('HSET', recordBase .. 'meta', 'createdAt', tostring(plan.createdAt), 'kind', 'dag')
redis.call('UNLINK', recordBase .. 'jobs', recordBase .. 'roots')
local result = {'OK'}
for n = 1, nodeCount do
  redis.call('SADD', recordBase .. 'jobs', nodeArg(n, 2) .. ':' .. ids[n])
  redis.call('HSET', nodeArg(n, 1) .. ':job:' .. ids[n], 'flowId', plan.flowId)
  result[#result + 1] = ids[n]
end
for _, n in ipairs(plan.roots) do redis.call('SADD', recordBase .. 'roots', nodeArg(n, 2) .. ':' .. ids[n]) end
return result
