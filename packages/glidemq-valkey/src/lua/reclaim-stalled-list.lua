-- Stalled-job recovery for jobs claimed from the priority or lifo lists (glidemq_reclaimStalledListJobs):
-- they have no PEL entry, so while list-active > 0 a bounded SCAN finds active list-sourced jobs
-- (lifo=1 or priority>0) whose lastActive is older than their lock duration. Each gets lastActive=now
-- first (so two schedulers do not both take it), then stalledCount+1 and back to its list, or failed
-- once stalledCount passes maxStalledCount; list-active is decremented either way.
-- KEYS: stream, events, failed, metrics:failed, list-active
-- ARGV: minIdleMs, maxStalledCount, now, workerLockDuration,
--       skipLeased ('1': leave jobs under a Switchyard lease to its own expiry; a lease is live only
--       while syLeaseStart == processedOn, since any later activation voids it)
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local minIdle = tonumber(ARGV[1])
local maxStalled = tonumber(ARGV[2]) or 1
local now = tonumber(ARGV[3])
local workerLock = tonumber(ARGV[4]) or 0
if (tonumber(redis.call('GET', KEYS[5])) or 0) <= 0 then return 0 end
local cursor = '0'
local iterations = 0
local count = 0
repeat
  iterations = iterations + 1
  local scanned = redis.call('SCAN', cursor, 'MATCH', prefix .. 'job:*', 'COUNT', 500)
  cursor = scanned[1]
  for _, jobKey in ipairs(scanned[2]) do
    local v = redis.call('HMGET', jobKey, 'state', 'lastActive', 'lifo', 'priority', 'opts', 'processedOn', 'name', 'syWorker', 'syLeaseStart')
    local lifo = v[3] == '1'
    local priority = tonumber(v[4]) or 0
    local lastActive = tonumber(v[2])
    local threshold = tonumber(decodeOpts(v[5])['lockDuration']) or 0
    if threshold < 1000 or threshold > 86400000 then threshold = 0 end
    if threshold == 0 then threshold = workerLock > 0 and workerLock or minIdle end
    local leased = ARGV[5] == '1' and v[8] and v[9] == v[6]
    if v[1] == 'active' and not leased and (lifo or priority > 0) and lastActive and now - lastActive >= threshold then
      local jobId = string.sub(jobKey, #prefix + 5)
      redis.call('HSET', jobKey, 'lastActive', tostring(now))
      if isExpired(jobKey, now) then
        expireJob(prefix, jobKey, jobId, now)
      else
        local stalled = redis.call('HINCRBY', jobKey, 'stalledCount', 1)
        -- Whatever Switchyard lease the job carried is void now; left behind, it would still read as held.
        clearLease(prefix, jobKey, jobId)
        if stalled > maxStalled then
          local reason = 'job stalled more than maxStalledCount'
          redis.call('ZADD', KEYS[3], now, jobId)
          redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', tostring(now))
          emitEvent(KEYS[2], 'failed', jobId, {'failedReason', reason})
          recordMetrics(KEYS[4], now, now - (tonumber(v[6]) or now))
        else
          emitEvent(KEYS[2], 'stalled', jobId, nil)
          redis.call('HSET', jobKey, 'state', 'waiting')
          redis.call('HDEL', jobKey, 'processedOn', 'lastActive')
          if lifo then
            redis.call('RPUSH', prefix .. 'lifo', jobId)
          else
            redis.call('LPUSH', prefix .. 'priority', jobId)
          end
        end
      end
      decrListActive(KEYS[5])
      count = count + 1
    end
  end
until cursor == '0' or iterations >= 1000
return count
