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
local stallKeys = { events = KEYS[2], failed = KEYS[3], metrics = KEYS[4] }
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
    local threshold = lockThreshold(v[5], workerLock, minIdle)
    local leased = ARGV[5] == '1' and v[8] and v[9] == v[6]
    if v[1] == 'active' and not leased and (lifo or priority > 0) and lastActive and now - lastActive >= threshold then
      local jobId = string.sub(jobKey, #prefix + 5)
      redis.call('HSET', jobKey, 'lastActive', tostring(now))
      if isExpired(jobKey, now) then
        expireJob(prefix, jobKey, jobId, now)
      elseif not stallJob(stallKeys, prefix, jobKey, jobId, now, maxStalled, v[6]) then
        if lifo then
          redis.call('RPUSH', prefix .. 'lifo', jobId)
        else
          redis.call('LPUSH', prefix .. 'priority', jobId)
        end
      end
      decrListActive(KEYS[5])
      count = count + 1
    end
  end
until cursor == '0' or iterations >= 1000
return count
