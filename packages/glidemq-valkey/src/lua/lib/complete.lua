-- Completion as glidemq_complete does it, shared by complete.lua, complete-many.lua and
-- complete-reserve-many.lua.

-- The completions of one script call, all at the same `now`. What takes many members in one command
-- (XACK and XDEL of the stream entries, ZADD `completed`, ZREM `sy:leases`, the metrics buckets) is
-- written once for all of them by flushCompletions: the same end state as job by job, for far fewer
-- redis.call()s, whose own overhead in Lua outweighs these commands' work.
local function newCompletions(prefix, group, now)
  return { prefix = prefix, group = group, now = now, nowStr = tostring(now), entries = {}, finished = {}, released = {},
    jobs = 0, duration = 0 }
end

local function flushCompletions(batch)
  local prefix = batch.prefix
  local entries, finished, released = batch.entries, batch.finished, batch.released
  for i = 1, #entries, 1000 do
    local last = math.min(i + 999, #entries)
    redis.call('XACK', prefix .. 'stream', batch.group, unpack(entries, i, last))
    redis.call('XDEL', prefix .. 'stream', unpack(entries, i, last))
  end
  for i = 1, #finished, 1000 do
    redis.call('ZADD', prefix .. 'completed', unpack(finished, i, math.min(i + 999, #finished)))
  end
  for i = 1, #released, 1000 do
    redis.call('ZREM', prefix .. 'sy:leases', unpack(released, i, math.min(i + 999, #released)))
  end
  if batch.jobs > 0 then recordMetrics(prefix .. 'metrics:completed', batch.now, batch.duration, batch.jobs) end
  batch.entries, batch.finished, batch.released, batch.jobs, batch.duration = {}, {}, {}, 0, 0
end

-- The fields a completion checks, by their place in `h`.
local COMPLETION_FIELDS = {'state', 'syWorker', 'processedOn', 'syLeaseStart', 'syEntryId', 'opts', 'parentId'}
local COMPLETION_SLOT = {}
for i, field in ipairs(COMPLETION_FIELDS) do COMPLETION_SLOT[field] = i end

-- Completes active job `jobId` of the batch's queue (newCompletions; the caller flushes it).
-- leaseWorker '' skips the lease check; entryId '-' means the one Switchyard recorded (or the stream
-- is searched). Returns {'OK', before, deps} (with wantHash: `before` is the job's hash as read before
-- completion, which wrote state=completed, returnvalue and finishedOn and, when syWorker was set,
-- deleted the sy lease fields; `deps` its deps members) or a refusal:
-- {'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}. heldRun is the processedOn of the run
-- whose hash the caller holds from its reserve ('' = none): while the job is still in that run,
-- `before` is left empty and the caller's copy stands for it (the hash is neither read whole nor sent).
local function completeJob(batch, jobId, entryId, returnvalue, leaseWorker, wantHash, heldRun)
  local prefix, now = batch.prefix, batch.now
  local jobKey = prefix .. 'job:' .. jobId
  local h, whole = nil, nil
  local held = heldRun ~= nil and heldRun ~= ''
  if not wantHash or held then h = redis.call('HMGET', jobKey, unpack(COMPLETION_FIELDS)) end
  if wantHash and (not held or h[3] ~= heldRun) then
    -- The caller holds no copy of this run: one HGETALL serves the checks and its copy of the finished job.
    whole = redis.call('HGETALL', jobKey)
    h = {false, false, false, false, false, false, false}
    for i = 1, #whole, 2 do
      local slot = COMPLETION_SLOT[whole[i]]
      if slot then h[slot] = whole[i + 1] end
    end
  end
  if not h[1] then return {'NOT_FOUND'} end
  if h[1] ~= 'active' then return {'INVALID_STATE', h[1]} end
  if leaseWorker ~= '' and (h[2] ~= leaseWorker or h[3] ~= h[4]) then return {'LEASE_LOST'} end
  if entryId == '-' then
    -- Switchyard recorded the entry at reserve; a job someone else claimed is looked up in the stream.
    entryId = (h[3] == h[4] and h[5]) or findEntry(prefix .. 'stream', jobId) or ''
  end
  local processedOn = tonumber(h[3]) or now
  if entryId ~= '' then batch.entries[#batch.entries + 1] = entryId end
  batch.finished[#batch.finished + 1] = batch.nowStr
  batch.finished[#batch.finished + 1] = jobId
  redis.call('HSET', jobKey, 'state', 'completed', 'returnvalue', returnvalue, 'finishedOn', batch.nowStr)
  if h[2] then
    redis.call('HDEL', jobKey, 'syWorker', 'syLeaseUntil', 'syLeaseStart', 'syEntryId')
    batch.released[#batch.released + 1] = jobId
  end
  emitEvent(prefix .. 'events', 'completed', jobId, {'returnvalue', returnvalue})
  batch.jobs = batch.jobs + 1
  if now - processedOn > 0 then batch.duration = batch.duration + (now - processedOn) end
  if entryId == '' then decrListActive(prefix .. 'list-active') end
  -- One EXISTS tells whether the job has dependencies or dependents at all (most jobs have neither).
  local linked = redis.call('EXISTS', prefix .. 'deps:' .. jobId, prefix .. 'parents:' .. jobId) > 0
  notifyParent(prefix, jobKey, jobId, h[7], linked)
  local deps = (wantHash and linked) and redis.call('SMEMBERS', prefix .. 'deps:' .. jobId) or {}
  if h[6] and string.find(h[6], 'removeOnComplete', 1, true) then
    -- Retention reads the `completed` set: what this call has finished must be in it first.
    flushCompletions(batch)
    applyRetention(prefix .. 'completed', prefix, jobKey, jobId, decodeOpts(h[6])['removeOnComplete'], now)
  end
  return {'OK', whole or {}, deps}
end
