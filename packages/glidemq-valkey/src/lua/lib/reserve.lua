-- A Switchyard reserve, shared by reserve.lua and complete-reserve-many.lua.

-- Claims jobs of the queue at `prefix` in a glide-mq worker's order, expired Switchyard leases first,
-- for several workers at once: claims is {{worker, leaseUntil, count}, ...} and the jobs are dealt out
-- in that order, so the queue's checks (pause, expired leases, promotion, rate limit) and the stream
-- read happen once for all. Stream entries are read by `consumer` (the consumer only names who
-- read an entry; the lease in the job's hash says who holds it). worker '' is a plain glide-mq style
-- claim (no lease fields, no events). honourPause: take nothing while meta.paused is 1; promote: move
-- due delayed jobs first. Returns, per claim, {{jobId, entryId, flatHash}, ...}.
local function reserveForEach(prefix, now, group, consumer, claims, honourPause, promote)
  local streamKey, eventsKey, metaKey, leasesKey = prefix .. 'stream', prefix .. 'events', prefix .. 'meta', prefix .. 'sy:leases'
  local nowStr = tostring(now)
  local slots, owners = {}, {}
  for i, claim in ipairs(claims) do
    for _ = 1, claim.count do
      slots[#slots + 1] = claim
      owners[#owners + 1] = i
    end
  end
  local count = #slots
  local leaseWorker = (claims[1] and claims[1].worker) or ''
  -- A job a Switchyard worker takes from the priority or lifo list announces `active`, as glide-mq's
  -- Worker does for those when it fetches the next job (QueueEvents listeners wait for it); a stream job
  -- does not, as with glide-mq. A plain glide-mq style claim (the golden replays' first fetch) stays silent.
  local ctx = {
    prefix = prefix, now = now, group = group, consumer = consumer, slots = slots,
    leaseWorker = leaseWorker, leaseUntil = '', activeEvents = leaseWorker ~= ''
  }
  local out = {}
  local function dealt()
    local each = {}
    for i = 1, #claims do each[i] = {} end
    for n, taken in ipairs(out) do
      local mine = each[owners[n]]
      mine[#mine + 1] = taken
    end
    return each
  end
  if count == 0 then return dealt() end
  -- One HMGET of meta serves the pause and the rate limit checks.
  local meta = (honourPause or leaseWorker ~= '') and redis.call('HMGET', metaKey, 'paused', 'rateLimitMax', 'rateLimitDuration') or {}
  if honourPause and meta[1] == '1' then return dealt() end

  if leaseWorker ~= '' then
    local expired = redis.call('ZRANGEBYSCORE', leasesKey, '-inf', nowStr, 'LIMIT', 0, count)
    for _, jobId in ipairs(expired) do
      redis.call('ZREM', leasesKey, jobId)
      local jobKey = prefix .. 'job:' .. jobId
      local h = redis.call('HMGET', jobKey, 'state', 'syLeaseUntil', 'processedOn', 'syLeaseStart', 'syEntryId',
        'attemptsMade', 'maxAttempts', 'opts')
      if h[1] == 'active' and h[2] and tonumber(h[2]) <= now and h[3] == h[4] then
        -- A lease that ran out counts as a stall: the attempt is kept and the job is handed out again
        -- while attempts remain, else it fails for good.
        local stalled = redis.call('HINCRBY', jobKey, 'stalledCount', 1)
        emitEvent(eventsKey, 'stalled', jobId, nil)
        local opts = decodeOpts(h[8])
        local maxAttempts = math.max(1, tonumber(opts['attempts']) or tonumber(h[7]) or 0)
        local entryId = h[5] or ''
        if (tonumber(h[6]) or 0) + stalled >= maxAttempts then
          local reason = 'job stalled more than maxStalledCount'
          ackAndDelete(streamKey, group, entryId)
          clearLease(prefix, jobKey, jobId)
          redis.call('ZADD', prefix .. 'failed', now, jobId)
          redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', nowStr)
          emitEvent(eventsKey, 'failed', jobId, {'failedReason', reason})
          recordMetrics(prefix .. 'metrics:failed', now, now - (tonumber(h[3]) or now))
          if entryId == '' then decrListActive(prefix .. 'list-active') end
        else
          if entryId ~= '' then
            redis.call('XCLAIM', streamKey, group, consumer, 0, entryId, 'JUSTID')
          end
          local slot = slots[#out + 1]
          redis.call('HSET', jobKey, 'processedOn', nowStr, 'lastActive', nowStr, 'syWorker', slot.worker,
            'syLeaseUntil', slot.leaseUntil, 'syLeaseStart', nowStr)
          redis.call('ZADD', leasesKey, slot.leaseUntil, jobId)
          out[#out + 1] = {jobId, entryId, redis.call('HGETALL', jobKey)}
        end
      end
    end
  end

  if #out < count then
    if promote then promoteDue(prefix, now, 1000) end
    -- glide-mq's global rate limit (meta rateLimitMax/rateLimitDuration) binds a Switchyard reserve as
    -- it binds glide-mq's workers: jobs taken count in the same `rate` window (windowStart, count), and
    -- a job is taken while fewer than `max` were taken in it (so a max of 2.5 lets 3 through, as
    -- glide-mq's `count >= max` check does; a fractional want would also be no COUNT for XREADGROUP).
    local want = count
    local rateKey, used, windowStart = nil, 0, now
    if leaseWorker ~= '' then
      local max, duration = tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
      if max > 0 then
        rateKey = prefix .. 'rate'
        local window = redis.call('HMGET', rateKey, 'windowStart', 'count')
        windowStart = tonumber(window[1]) or 0
        used = tonumber(window[2]) or 0
        if now - windowStart >= duration then
          windowStart = now
          used = 0
        end
        want = math.min(count, #out + math.max(0, math.ceil(max - used)))
      end
    end
    local before = #out
    if want > before then fetchJobs(ctx, want, out) end
    if rateKey and #out > before then
      redis.call('HSET', rateKey, 'windowStart', tostring(windowStart), 'count', tostring(used + #out - before))
    end
  end
  return dealt()
end

-- Claims up to `count` jobs for one worker (reserveForEach with one claim); {{jobId, entryId, flatHash}, ...}.
local function reserveJobs(prefix, now, group, consumer, count, leaseWorker, leaseUntil, honourPause, promote)
  local claims = {{worker = leaseWorker, leaseUntil = leaseUntil, count = count}}
  return reserveForEach(prefix, now, group, consumer, claims, honourPause, promote)[1]
end
