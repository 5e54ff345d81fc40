-- Promotion and claiming, in a glide-mq worker's order.

-- Moves due members of `scheduled` to the priority list (band > 0), the lifo list (lifo=1) or the
-- stream, band by band from the highest priority (lowest band) up; at most `limit` per call.
local function promoteDue(prefix, now, limit)
  local scheduledKey = prefix .. 'scheduled'
  local count = 0
  local cursor = 0
  while count < limit do
    local first = redis.call('ZRANGEBYSCORE', scheduledKey, string.format('%.0f', cursor), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #first == 0 then break end
    local band = math.floor((tonumber(first[2]) or 0) / PRIORITY_SHIFT)
    local low = band * PRIORITY_SHIFT
    local due = redis.call('ZRANGEBYSCORE', scheduledKey, string.format('%.0f', low), string.format('%.0f', low + now),
      'LIMIT', 0, limit - count)
    for i = 1, #due do
      local member = due[i]
      local jobId = member
      local retryGroup = nil
      local sepStart, sepEnd = string.find(member, '||', 1, true)
      if sepStart then
        jobId = string.sub(member, 1, sepStart - 1)
        retryGroup = string.sub(member, sepEnd + 1)
        if retryGroup == '' then retryGroup = nil end
      end
      local jobKey = prefix .. 'job:' .. jobId
      redis.call('ZREM', scheduledKey, member)
      count = count + 1
      if isExpired(jobKey, now) then
        expireJob(prefix, jobKey, jobId, now)
      else
        if redis.call('HGET', jobKey, 'lifo') == '1' then
          redis.call('RPUSH', prefix .. 'lifo', jobId)
        elseif band > 0 then
          redis.call('LPUSH', prefix .. 'priority', jobId)
        else
          local name = redis.call('HGET', jobKey, 'name') or ''
          if retryGroup then
            redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', name, 'retryGroup', retryGroup)
          else
            redis.call('XADD', prefix .. 'stream', '*', 'jobId', jobId, 'name', name)
          end
        end
        redis.call('HSET', jobKey, 'state', 'waiting')
        emitEvent(prefix .. 'events', 'promoted', jobId, nil)
      end
    end
    cursor = (band + 1) * PRIORITY_SHIFT
  end
  return count
end

-- ctx: prefix, now, group, consumer, leaseWorker, leaseUntil, activeEvents (list jobs only, as
-- glide-mq's completeAndFetchNext does). Returns the job's flat hash, or nil when it was skipped
-- (gone, revoked or expired; its stream entry is then acknowledged and deleted).
local function activateJob(ctx, jobId, entryId, fromList)
  local prefix = ctx.prefix
  local jobKey = prefix .. 'job:' .. jobId
  local streamKey = prefix .. 'stream'
  -- One HGETALL; the activation fields are then patched into the reply, as glidemq_moveToActive does.
  local hash = redis.call('HGETALL', jobKey)
  if #hash == 0 then
    ackAndDelete(streamKey, ctx.group, entryId)
    return nil
  end
  -- Where each field's value sits in the reply, so that what is written below can be patched into it.
  local at = {}
  for i = 1, #hash, 2 do at[hash[i]] = i + 1 end
  local state, revoked = hash[at.state or 0], hash[at.revoked or 0]
  local expireAt, leaseLeft = tonumber(hash[at.expireAt or 0]), at.syWorker ~= nil
  if revoked == '1' then
    ackAndDelete(streamKey, ctx.group, entryId)
    if state ~= 'failed' then
      redis.call('ZADD', prefix .. 'failed', ctx.now, jobId)
      redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', 'revoked', 'finishedOn', tostring(ctx.now))
      emitEvent(prefix .. 'events', 'failed', jobId, {'failedReason', 'revoked'})
    end
    return nil
  end
  if expireAt and expireAt > 0 and ctx.now > expireAt then
    expireJob(prefix, jobKey, jobId, ctx.now)
    ackAndDelete(streamKey, ctx.group, entryId)
    return nil
  end
  local nowStr = ctx.nowStr or tostring(ctx.now)
  local changes = {'state', 'active', 'processedOn', nowStr, 'lastActive', nowStr}
  if ctx.leaseWorker ~= '' then
    -- The lease goes in the same HSET; the reply is patched rather than read again (a second
    -- HGETALL cost a reserve about a fifth of its time).
    changes[7], changes[8], changes[9], changes[10] = 'syWorker', ctx.leaseWorker, 'syLeaseUntil', ctx.leaseUntil
    changes[11], changes[12], changes[13], changes[14] = 'syLeaseStart', nowStr, 'syEntryId', entryId
    local leased = ctx.leased
    if leased then
      -- fetchJobs adds the leases of all the jobs it claims in one ZADD.
      leased[#leased + 1] = ctx.leaseUntil
      leased[#leased + 1] = jobId
    else
      redis.call('ZADD', prefix .. 'sy:leases', ctx.leaseUntil, jobId)
    end
  end
  redis.call('HSET', jobKey, unpack(changes))
  for i = 1, #changes, 2 do
    local field, value = changes[i], changes[i + 1]
    if at[field] then
      hash[at[field]] = value
    else
      hash[#hash + 1] = field
      hash[#hash + 1] = value
    end
  end
  if ctx.leaseWorker == '' and leaseLeft then
    -- Activated without a lease: an old Switchyard lease left on the job must not read as held.
    clearLease(prefix, jobKey, jobId)
    hash = redis.call('HGETALL', jobKey)
  end
  if fromList then
    if ctx.activeEvents then emitEvent(prefix .. 'events', 'active', jobId, nil) end
    redis.call('INCR', prefix .. 'list-active')
  end
  return hash
end

-- A grouped reserve (lib/reserve.lua) leases the n-th job it takes to the n-th slot's worker.
local function useSlot(ctx, n)
  local slot = ctx.slots and ctx.slots[n]
  if slot then ctx.leaseWorker, ctx.leaseUntil = slot.worker, slot.leaseUntil end
end

-- The claim order of a glide-mq worker: the priority list, then the lifo list, then the stream
-- through the `workers` consumer group (created from id 0 when missing). Appends {id, entryId, hash}.
local function fetchJobs(ctx, count, out)
  -- Converting a number to text costs Lua about as much as a small command: once per call.
  ctx.leased, ctx.nowStr = {}, tostring(ctx.now)
  local lists = {ctx.prefix .. 'priority', ctx.prefix .. 'lifo'}
  -- One EXISTS spares two empty RPOPs on the hot path of a queue that uses neither list.
  local listed = redis.call('EXISTS', lists[1], lists[2]) > 0
  for l = 1, (listed and 2 or 0) do
    local tries = 0
    while #out < count and tries < count + 3 do
      local jobId = redis.call('RPOP', lists[l])
      if not jobId then break end
      useSlot(ctx, #out + 1)
      local hash = activateJob(ctx, jobId, '', true)
      if hash then out[#out + 1] = {jobId, '', hash} else tries = tries + 1 end
    end
  end
  local streamKey = ctx.prefix .. 'stream'
  for _ = 1, 3 do
    if #out >= count then break end
    local read = redis.pcall('XREADGROUP', 'GROUP', ctx.group, ctx.consumer, 'COUNT', count - #out, 'STREAMS', streamKey, '>')
    if type(read) == 'table' and read.err then
      -- Only a missing group (or stream) is made here; any other refusal is the caller's to see.
      if string.sub(read.err, 1, 7) ~= 'NOGROUP' then error(read) end
      redis.call('XGROUP', 'CREATE', streamKey, ctx.group, '0', 'MKSTREAM')
      read = redis.call('XREADGROUP', 'GROUP', ctx.group, ctx.consumer, 'COUNT', count - #out, 'STREAMS', streamKey, '>')
    end
    if not read or not read[1] or #read[1][2] == 0 then break end
    for _, entry in ipairs(read[1][2]) do
      local jobId = nil
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'jobId' then jobId = fields[f + 1] break end
      end
      if jobId then
        useSlot(ctx, #out + 1)
        local hash = activateJob(ctx, jobId, entry[1], false)
        if hash then out[#out + 1] = {jobId, entry[1], hash} end
      else
        ackAndDelete(streamKey, ctx.group, entry[1])
      end
    end
  end
  local leased = ctx.leased
  ctx.leased = nil
  for i = 1, #leased, 1000 do
    redis.call('ZADD', ctx.prefix .. 'sy:leases', unpack(leased, i, math.min(i + 999, #leased)))
  end
  return out
end
