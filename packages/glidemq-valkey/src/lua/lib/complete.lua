-- Completion as glidemq_complete does it, shared by complete.lua and complete-many.lua.

-- Completes active job `jobId` of the queue at `prefix`. leaseWorker '' skips the lease check;
-- entryId '-' means the one Switchyard recorded (or the stream is searched). Returns {'OK', snapshot}
-- (snapshot: the finished hash before retention, {} unless asked for) or a refusal:
-- {'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}.
local function completeJob(prefix, jobId, entryId, returnvalue, now, group, leaseWorker, wantSnapshot)
  local jobKey = prefix .. 'job:' .. jobId
  local streamKey = prefix .. 'stream'
  local completedKey = prefix .. 'completed'
  local fields = {'state', 'syWorker', 'processedOn', 'syLeaseStart', 'syEntryId', 'opts', 'parentId'}
  local h, whole = nil, nil
  if wantSnapshot then
    -- One HGETALL serves the checks and the snapshot, patched below with what completion writes.
    whole = redis.call('HGETALL', jobKey)
    local values = {}
    for i = 1, #whole, 2 do values[whole[i]] = whole[i + 1] end
    h = {}
    for i, field in ipairs(fields) do h[i] = values[field] or false end
  else
    h = redis.call('HMGET', jobKey, unpack(fields))
  end
  if not h[1] then return {'NOT_FOUND'} end
  if h[1] ~= 'active' then return {'INVALID_STATE', h[1]} end
  if leaseWorker ~= '' and (h[2] ~= leaseWorker or h[3] ~= h[4]) then return {'LEASE_LOST'} end
  if entryId == '-' then
    -- Switchyard recorded the entry at reserve; a job someone else claimed is looked up in the stream.
    entryId = (h[3] == h[4] and h[5]) or findEntry(streamKey, jobId) or ''
  end
  local processedOn = tonumber(h[3]) or now
  local nowStr = tostring(now)
  ackAndDelete(streamKey, group, entryId)
  redis.call('ZADD', completedKey, now, jobId)
  redis.call('HSET', jobKey, 'state', 'completed', 'returnvalue', returnvalue, 'finishedOn', nowStr)
  if h[2] then clearLease(prefix, jobKey, jobId) end
  emitEvent(prefix .. 'events', 'completed', jobId, {'returnvalue', returnvalue})
  recordMetrics(prefix .. 'metrics:completed', now, now - processedOn)
  if entryId == '' then decrListActive(prefix .. 'list-active') end
  notifyParent(prefix, jobKey, jobId, h[7])
  local snapshot = {}
  if wantSnapshot then
    local written = {state = 'completed', returnvalue = returnvalue, finishedOn = nowStr}
    local cleared = h[2] and {syWorker = true, syLeaseUntil = true, syLeaseStart = true, syEntryId = true} or {}
    for i = 1, #whole, 2 do
      local field = whole[i]
      if not cleared[field] then
        snapshot[#snapshot + 1] = field
        snapshot[#snapshot + 1] = written[field] or whole[i + 1]
        written[field] = nil
      end
    end
    for _, field in ipairs({'state', 'returnvalue', 'finishedOn'}) do
      if written[field] then
        snapshot[#snapshot + 1] = field
        snapshot[#snapshot + 1] = written[field]
      end
    end
  end
  if h[6] and string.find(h[6], 'removeOnComplete', 1, true) then
    applyRetention(completedKey, prefix, jobKey, jobId, decodeOpts(h[6])['removeOnComplete'], now)
  end
  return {'OK', snapshot}
end
