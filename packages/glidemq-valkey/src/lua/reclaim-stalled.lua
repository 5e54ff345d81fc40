-- Stalled-job recovery of a glide-mq worker's scheduler (glidemq_reclaimStalled, v91+ behaviour):
-- XAUTOCLAIM entries idle for minIdleMs; a job whose lastActive is older than its lock duration
-- gets stalledCount+1 and a fresh stream entry, or fails once stalledCount passes maxStalledCount.
-- KEYS: stream, events, failed, metrics:failed
-- ARGV: group, consumer, minIdleMs, maxStalledCount, now, workerLockDuration,
--       skipLeased ('1': leave jobs under a Switchyard lease to its own expiry; a lease is live only
--       while syLeaseStart == processedOn, since any later activation voids it)
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local group = ARGV[1]
local minIdle = tonumber(ARGV[3])
local maxStalled = tonumber(ARGV[4]) or 1
local now = tonumber(ARGV[5])
local workerLock = tonumber(ARGV[6]) or 0
local claimed = redis.pcall('XAUTOCLAIM', KEYS[1], group, ARGV[2], minIdle, '0-0')
if type(claimed) ~= 'table' or claimed.err then return 0 end
local count = 0
for _, entry in ipairs(claimed[2] or {}) do
  local entryId = entry[1]
  local jobId = nil
  local fields = entry[2]
  if type(fields) == 'table' then
    for f = 1, #fields, 2 do
      if fields[f] == 'jobId' then jobId = fields[f + 1] break end
    end
  end
  if jobId then
    local jobKey = prefix .. 'job:' .. jobId
    count = count + 1
    if isExpired(jobKey, now) then
      expireJob(prefix, jobKey, jobId, now)
      ackAndDelete(KEYS[1], group, entryId)
    else
      local h = redis.call('HMGET', jobKey, 'lastActive', 'opts', 'processedOn', 'name', 'syWorker', 'syLeaseStart')
      local lastActive = tonumber(h[1])
      if ARGV[7] == '1' and h[5] and h[6] == h[3] then lastActive = now end
      local threshold = tonumber(decodeOpts(h[2])['lockDuration']) or 0
      if threshold < 1000 or threshold > 86400000 then threshold = 0 end
      if threshold == 0 then threshold = workerLock > 0 and workerLock or minIdle end
      if not (lastActive and now - lastActive < threshold) then
        local stalled = redis.call('HINCRBY', jobKey, 'stalledCount', 1)
        ackAndDelete(KEYS[1], group, entryId)
        -- Whatever Switchyard lease the job carried is void now; left behind, it would still read as held.
        clearLease(prefix, jobKey, jobId)
        if stalled > maxStalled then
          local reason = 'job stalled more than maxStalledCount'
          redis.call('ZADD', KEYS[3], now, jobId)
          redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', tostring(now))
          emitEvent(KEYS[2], 'failed', jobId, {'failedReason', reason})
          recordMetrics(KEYS[4], now, now - (tonumber(h[3]) or now))
        else
          emitEvent(KEYS[2], 'stalled', jobId, nil)
          redis.call('HSET', jobKey, 'state', 'waiting')
          redis.call('HDEL', jobKey, 'processedOn', 'lastActive')
          redis.call('XADD', KEYS[1], '*', 'jobId', jobId, 'name', h[4] or '')
        end
      end
    end
  end
end
return count
