-- Part 5: pop and peek, with the housekeeping they do first: expired locks (with the grace
-- handshake), recurring spawns and scheduled promotion.

local function exhausted_message(queue)
  return 'Job exhausted retries in queue "' .. queue .. '"'
end

-- A lock expired: the first pop after expiry only warns the holder (lock_lost) and grants a
-- grace period; a pop after the grace period takes the job back, counting a retry. With
-- grace-period <= 0 both happen in one pop. Returns the jids to hand out again.
local function reclaim_expired(now, queue, count)
  local reclaimed = {}
  for _, jid in ipairs(expired_locks(queue, now, 0, count)) do
    local holder = redis.call('hget', job_key(jid), 'worker')
    redis.call('zrem', worker_jobs_key(holder), jid)

    local grace_period = tonumber(config_get('grace-period'))
    local warned = tonumber(redis.call('hget', job_key(jid), 'grace') or 0) == 1
    local warn, take_back = not warned, warned
    if grace_period <= 0 then
      warn, take_back = true, true
    end

    if warn then
      if is_tracked(jid) then
        publish('stalled', jid)
      end
      history_add(jid, now, 'timed-out')
      redis.call('hset', job_key(jid), 'grace', 1)
      announce_lock_lost(jid, holder)
      set_add(queue, 'locks', now + grace_period, jid)
      redis.call('hincrby', stats_key(day_of(now), queue), 'retries', 1)
    end

    if take_back then
      redis.call('hdel', job_key(jid), 'grace', 0)
      local remaining = tonumber(redis.call('hincrby', job_key(jid), 'remaining', -1))
      if remaining < 0 then
        set_remove(queue, 'work', jid)
        set_remove(queue, 'locks', jid)
        set_remove(queue, 'scheduled', jid)
        local group = 'failed-retries-' .. redis.call('hget', job_key(jid), 'queue')
        history_add(jid, now, 'failed', { group = group })
        redis.call('hmset', job_key(jid), 'state', 'failed', 'worker', '', 'expires', '')
        redis.call('hset', job_key(jid), 'failure', cjson.encode({
          group = group,
          message = exhausted_message(queue),
          when = now,
          worker = redis.call('hget', job_key(jid), 'worker'),
        }))
        add_failure(group, jid)
        if is_tracked(jid) then
          publish('failed', jid)
        end
        publish('log', cjson.encode({
          jid = jid,
          event = 'failed',
          group = group,
          worker = holder,
          message = exhausted_message(queue),
        }))
        count_failure(day_of(now), queue)
      else
        reclaimed[#reclaimed + 1] = jid
      end
    end
  end
  return reclaimed
end

-- Spawns the children of recurring jobs that are due (several when intervals were missed,
-- limited by `backlog`), at most `count` in all.
local function spawn_recurring(now, queue, count)
  local spawned = 0
  for _, rjid in ipairs(redis.call('zrangebyscore', queue_key(queue, 'recur'), 0, now, 'LIMIT', 0, count)) do
    local klass, data, priority, tags, retries, interval, backlog = unpack(redis.call('hmget',
      'ql:r:' .. rjid, 'klass', 'data', 'priority', 'tags', 'retries', 'interval', 'backlog'))
    local tag_list = cjson.decode(tags)
    local due = math.floor(tonumber(redis.call('zscore', queue_key(queue, 'recur'), rjid)))
    interval = tonumber(interval)
    backlog = tonumber(backlog or 0)
    if backlog ~= 0 then
      local missed = (now - due) / interval
      if missed > backlog then
        due = due + math.ceil(missed - backlog) * interval
      end
    end

    while due <= now and spawned < count do
      local n = redis.call('hincrby', 'ql:r:' .. rjid, 'count', 1)
      spawned = spawned + 1
      local child = rjid .. '-' .. n
      tag_index(child, tag_list, now)
      redis.call('hmset', job_key(child),
        'jid', child,
        'klass', klass,
        'data', data,
        'priority', priority,
        'tags', tags,
        'state', 'waiting',
        'worker', '',
        'expires', 0,
        'queue', queue,
        'retries', retries,
        'remaining', retries,
        'time', string.format('%.20f', due),
        'spawned_from_jid', rjid)
      history_add(child, due, 'put', { q = queue })
      work_add(queue, due, priority, child)
      due = due + interval
      set_add(queue, 'recur', due, rjid)
    end
  end
end

-- Moves up to `count` due scheduled jobs into the work set (FIFO position taken from now).
local function promote_scheduled(now, queue, count)
  local due = redis.call('zrangebyscore', queue_key(queue, 'scheduled'), 0, now, 'LIMIT', 0, count)
  for _, jid in ipairs(due) do
    local priority = tonumber(redis.call('hget', job_key(jid), 'priority') or 0)
    work_add(queue, now, priority, jid)
    set_remove(queue, 'scheduled', jid)
    redis.call('hset', job_key(jid), 'state', 'waiting')
  end
end

function Q.peek(now, queue, count)
  count = assert(tonumber(count), 'Peek(): Arg "count" missing or not a number: ' .. tostring(count))
  local jids = expired_locks(queue, now, 0, count)
  spawn_recurring(now, queue, count - #jids)
  promote_scheduled(now, queue, count - #jids)
  append_all(jids, work_top(queue, count - #jids))
  return jids
end

-- `lease_seconds` is Switchyard's extension (switchyard.pop); qless's pop uses the heartbeat config.
function Q.pop(now, queue, worker, count, lease_seconds)
  assert(worker, 'Pop(): Arg "worker" missing')
  count = assert(tonumber(count), 'Pop(): Arg "count" missing or not a number: ' .. tostring(count))
  local expires = now + (lease_seconds or heartbeat_seconds(queue))

  if is_paused(queue) then
    return {}
  end
  redis.call('zadd', 'ql:workers', now, worker)

  local max_concurrency = tonumber(config_get(queue .. '-max-concurrency', 0))
  if max_concurrency > 0 then
    local running = redis.call('zcount', queue_key(queue, 'locks'), now, '+inf')
    count = math.min(math.max(0, max_concurrency - running), count)
    if count == 0 then
      return {}
    end
  end

  local jids = reclaim_expired(now, queue, count)
  spawn_recurring(now, queue, count - #jids)
  promote_scheduled(now, queue, count - #jids)
  append_all(jids, work_top(queue, count - #jids))

  -- A jid left in the queue's sets after its job hash went away (a state real qless-core reaches
  -- too) is an error there (its pop unpacks the missing job's data). Raise before any job of this
  -- pop is marked running, rather than hand out a stub made of the fields written below.
  for _, jid in ipairs(jids) do
    if redis.call('exists', job_key(jid)) == 0 then
      error('Pop(): job ' .. jid .. ' in queue ' .. queue .. ' has no data (' .. job_key(jid) .. ' is missing)')
    end
  end

  for _, jid in ipairs(jids) do
    history_add(jid, now, 'popped', { worker = worker })
    local since = tonumber(redis.call('hget', job_key(jid), 'time') or now)
    record_duration(queue, now, 'wait', now - since)
    redis.call('hset', job_key(jid), 'time', string.format('%.20f', now))
    redis.call('zadd', worker_jobs_key(worker), expires, jid)
    redis.call('hmset', job_key(jid), 'worker', worker, 'expires', expires, 'state', 'running')
    set_add(queue, 'locks', expires, jid)
    if is_tracked(jid) then
      publish('popped', jid)
    end
  end

  if #jids > 0 then
    redis.call('zrem', queue_key(queue, 'work'), unpack(jids))
  end
  return jids
end
