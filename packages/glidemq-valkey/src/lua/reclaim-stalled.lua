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
local stallKeys = { events = KEYS[2], failed = KEYS[3], metrics = KEYS[4] }
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
      local threshold = lockThreshold(h[2], workerLock, minIdle)
      if not (lastActive and now - lastActive < threshold) then
        ackAndDelete(KEYS[1], group, entryId)
        if not stallJob(stallKeys, prefix, jobKey, jobId, now, maxStalled, h[3]) then
          redis.call('XADD', KEYS[1], '*', 'jobId', jobId, 'name', h[4] or '')
        end
      end
    end
  end
end
return count
