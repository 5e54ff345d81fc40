-- Part 2: the per-queue sorted sets and the per-day statistics hashes.
--   ql:q:<q>-work       jid -> priority - now/1e10 (popped highest first: priority, then FIFO)
--   ql:q:<q>-locks      jid -> lock expiry
--   ql:q:<q>-scheduled  jid -> when it becomes runnable
--   ql:q:<q>-depends    jid -> when it started waiting on dependencies
--   ql:q:<q>-recur      recurring jid -> next spawn time

-- A job's score in the work set: higher priority first, then first put first.
local function work_score(now, priority)
  return priority - (now / 10000000000)
end

-- `timeout` passes '+inf' so a timed-out job is popped before everything else.
local function work_add(queue, now, priority, jid)
  local score = priority
  if priority ~= '+inf' then
    score = work_score(now, priority)
  end
  return redis.call('zadd', queue_key(queue, 'work'), score, jid)
end

local function work_top(queue, count)
  if count == 0 then
    return {}
  end
  return redis.call('zrevrange', queue_key(queue, 'work'), 0, count - 1)
end

local function set_add(queue, kind, score, jid)
  redis.call('zadd', queue_key(queue, kind), score, jid)
end

local function set_remove(queue, kind, jid)
  redis.call('zrem', queue_key(queue, kind), jid)
end

local function set_size(queue, kind)
  return redis.call('zcard', queue_key(queue, kind))
end

local function expired_locks(queue, now, offset, count)
  return redis.call('zrangebyscore', queue_key(queue, 'locks'), '-inf', now, 'LIMIT', offset, count)
end

local function live_locks(queue, now, offset, count)
  return redis.call('zrangebyscore', queue_key(queue, 'locks'), now, '+inf', 'LIMIT', offset, count)
end

local function zrange_page(queue, kind, offset, count)
  return redis.call('zrange', queue_key(queue, kind), offset, offset + count - 1)
end

local function is_paused(queue)
  return redis.call('sismember', 'ql:paused_queues', queue) == 1
end

local function register_queue(queue, now)
  if redis.call('zscore', 'ql:queues', queue) == false then
    redis.call('zadd', 'ql:queues', now, queue)
  end
end

-------------------------------------------------------------------------------
-- Statistics. ql:s:<wait|run>:<day>:<q> holds a running mean and Welford's variance
-- accumulator plus a histogram: s0..s59 seconds, m1..m59 minutes, h1..h23 hours, d<n> days.
-------------------------------------------------------------------------------
local function record_duration(queue, now, kind, seconds)
  local key = 'ql:s:' .. kind .. ':' .. day_of(now) .. ':' .. queue
  local count, mean, vk = unpack(redis.call('hmget', key, 'total', 'mean', 'vk'))
  count = count or 0
  if count == 0 then
    mean = seconds
    vk = 0
    count = 1
  else
    count = count + 1
    local previous_mean = mean
    mean = mean + (seconds - mean) / count
    vk = vk + (seconds - mean) * (seconds - previous_mean)
  end

  local whole = math.floor(seconds)
  local bucket
  if whole < 60 then
    bucket = 's' .. whole
  elseif whole < 3600 then
    bucket = 'm' .. math.floor(whole / 60)
  elseif whole < 86400 then
    bucket = 'h' .. math.floor(whole / 3600)
  else
    bucket = 'd' .. math.floor(whole / 86400)
  end
  redis.call('hincrby', key, bucket, 1)
  redis.call('hmset', key, 'total', count, 'mean', mean, 'vk', vk)
end

local function stats_key(day, queue)
  return 'ql:s:stats:' .. day .. ':' .. queue
end

local function histogram_fields()
  local fields = {}
  for i = 0, 59 do fields[#fields + 1] = 's' .. i end
  for i = 1, 59 do fields[#fields + 1] = 'm' .. i end
  for i = 1, 23 do fields[#fields + 1] = 'h' .. i end
  for i = 1, 6 do fields[#fields + 1] = 'd' .. i end
  return fields
end

local function duration_summary(kind, day, queue)
  local key = 'ql:s:' .. kind .. ':' .. day .. ':' .. queue
  local count, mean, vk = unpack(redis.call('hmget', key, 'total', 'mean', 'vk'))
  count = tonumber(count) or 0
  mean = tonumber(mean) or 0
  vk = tonumber(vk)
  local summary = { count = count, mean = mean, histogram = {} }
  if count > 1 then
    summary.std = math.sqrt(vk / (count - 1))
  else
    summary.std = 0
  end
  local fields = histogram_fields()
  local values = redis.call('hmget', key, unpack(fields))
  for i = 1, #fields do
    summary.histogram[#summary.histogram + 1] = tonumber(values[i]) or 0
  end
  return summary
end

function Q.stats(queue, date)
  date = assert(tonumber(date), 'Stats(): Arg "date" missing or not a number: ' .. (date or 'nil'))
  local day = day_of(date)
  local retries, failed, failures =
    unpack(redis.call('hmget', stats_key(day, queue), 'retries', 'failed', 'failures'))
  return {
    retries = tonumber(retries or 0),
    failed = tonumber(failed or 0),
    failures = tonumber(failures or 0),
    wait = duration_summary('wait', day, queue),
    run = duration_summary('run', day, queue),
  }
end

-- Failure lists: ql:failures (groups) and ql:f:<group> (jids, newest first).
local function add_failure(group, jid)
  redis.call('sadd', 'ql:failures', group)
  redis.call('lpush', 'ql:f:' .. group, jid)
end

local function count_failure(day, queue)
  redis.call('hincrby', stats_key(day, queue), 'failures', 1)
  redis.call('hincrby', stats_key(day, queue), 'failed', 1)
end

-- Takes a failed job out of its failure group (on re-put and cancel).
local function drop_failure(jid, failure)
  redis.call('lrem', 'ql:f:' .. failure.group, 0, jid)
  if redis.call('llen', 'ql:f:' .. failure.group) == 0 then
    redis.call('srem', 'ql:failures', failure.group)
  end
end

-- Tag index: ql:t:<tag> (jid -> time tagged) and ql:tags (tag -> usage count, never removed).
local function untag_index(jid, tags)
  for _, tag in ipairs(tags) do
    redis.call('zrem', 'ql:t:' .. tag, jid)
    redis.call('zincrby', 'ql:tags', -1, tag)
  end
end

local function tag_index(jid, tags, now)
  for _, tag in ipairs(tags) do
    redis.call('zadd', 'ql:t:' .. tag, now, jid)
    redis.call('zincrby', 'ql:tags', 1, tag)
  end
end
