-- Claims up to `count` jobs in a glide-mq worker's order, atomically.
-- KEYS: stream, scheduled, events, priority, lifo, list-active, meta, sy:leases, failed, metrics:failed
-- ARGV: now, group, consumer, count, leaseWorker ('' = a plain glide-mq style claim, no lease fields),
--       leaseUntil, honourPause (1/0), promote (1/0)
-- Returns {{jobId, entryId, flatHash}, ...}; expired Switchyard leases come back first.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local now = tonumber(ARGV[1])
local count = tonumber(ARGV[4]) or 1
-- A job a Switchyard worker takes from the priority or lifo list announces `active`, as glide-mq's
-- Worker does for those when it fetches the next job (QueueEvents listeners wait for it); a stream job
-- does not, as with glide-mq. A plain glide-mq style claim (the golden replays' first fetch) stays silent.
local ctx = {
  prefix = prefix, now = now, group = ARGV[2], consumer = ARGV[3],
  leaseWorker = ARGV[5], leaseUntil = ARGV[6], activeEvents = ARGV[5] ~= ''
}
if ARGV[7] == '1' and redis.call('HGET', KEYS[7], 'paused') == '1' then return {} end
local out = {}

if ctx.leaseWorker ~= '' then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', ARGV[1], 'LIMIT', 0, count)
  for _, jobId in ipairs(expired) do
    redis.call('ZREM', KEYS[8], jobId)
    local jobKey = prefix .. 'job:' .. jobId
    local h = redis.call('HMGET', jobKey, 'state', 'syLeaseUntil', 'processedOn', 'syLeaseStart', 'syEntryId',
      'attemptsMade', 'maxAttempts', 'opts')
    if h[1] == 'active' and h[2] and tonumber(h[2]) <= now and h[3] == h[4] then
      -- A lease that ran out counts as a stall: the attempt is kept and the job is handed out again
      -- while attempts remain, else it fails for good.
      local stalled = redis.call('HINCRBY', jobKey, 'stalledCount', 1)
      emitEvent(KEYS[3], 'stalled', jobId, nil)
      local opts = decodeOpts(h[8])
      local maxAttempts = math.max(1, tonumber(opts['attempts']) or tonumber(h[7]) or 0)
      local entryId = h[5] or ''
      if (tonumber(h[6]) or 0) + stalled >= maxAttempts then
        local reason = 'job stalled more than maxStalledCount'
        ackAndDelete(KEYS[1], ctx.group, entryId)
        clearLease(prefix, jobKey, jobId)
        redis.call('ZADD', KEYS[9], now, jobId)
        redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', ARGV[1])
        emitEvent(KEYS[3], 'failed', jobId, {'failedReason', reason})
        recordMetrics(KEYS[10], now, now - (tonumber(h[3]) or now))
        if entryId == '' then decrListActive(KEYS[6]) end
      else
        if entryId ~= '' then
          redis.call('XCLAIM', KEYS[1], ctx.group, ctx.consumer, 0, entryId, 'JUSTID')
        end
        redis.call('HSET', jobKey, 'processedOn', ARGV[1], 'lastActive', ARGV[1], 'syWorker', ctx.leaseWorker,
          'syLeaseUntil', ctx.leaseUntil, 'syLeaseStart', ARGV[1])
        redis.call('ZADD', KEYS[8], ctx.leaseUntil, jobId)
        out[#out + 1] = {jobId, entryId, redis.call('HGETALL', jobKey)}
      end
    end
  end
end

if #out < count then
  if ARGV[8] == '1' then promoteDue(prefix, now, 1000) end
  -- glide-mq's global rate limit (meta rateLimitMax/rateLimitDuration) binds a Switchyard reserve as
  -- it binds glide-mq's workers: jobs taken count in the same `rate` window (windowStart, count), and
  -- none are taken once `max` were taken in it.
  local want = count
  local rateKey, used, windowStart = nil, 0, now
  if ctx.leaseWorker ~= '' then
    local limit = redis.call('HMGET', KEYS[7], 'rateLimitMax', 'rateLimitDuration')
    local max, duration = tonumber(limit[1]) or 0, tonumber(limit[2]) or 0
    if max > 0 then
      rateKey = prefix .. 'rate'
      local window = redis.call('HMGET', rateKey, 'windowStart', 'count')
      windowStart = tonumber(window[1]) or 0
      used = tonumber(window[2]) or 0
      if now - windowStart >= duration then
        windowStart = now
        used = 0
      end
      want = math.min(count, #out + math.max(0, max - used))
    end
  end
  local before = #out
  if want > before then fetchJobs(ctx, want, out) end
  if rateKey and #out > before then
    redis.call('HSET', rateKey, 'windowStart', tostring(windowStart), 'count', tostring(used + #out - before))
  end
end
return out
