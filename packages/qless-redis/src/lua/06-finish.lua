-- Part 6: the ways a running job ends: complete (optionally into a next queue), fail, retry.

-- Deletes a completed job's hash, history and tag entries (its dependency sets stay, as in qless)
-- and frees its unique key.
local function forget_completed(jid)
  release_unique(jid)
  untag_index(jid, cjson.decode(redis.call('hget', job_key(jid), 'tags') or '{}'))
  redis.call('del', job_key(jid))
  redis.call('del', job_key(jid, '-history'))
end

-- Keeps ql:completed within `jobs-history` seconds and `jobs-history-count` entries.
local function prune_completed(now)
  local max_count = tonumber(config_get('jobs-history-count') or 50000)
  local max_age = tonumber(config_get('jobs-history') or 7 * 24 * 60 * 60)
  for _, old in ipairs(redis.call('zrangebyscore', 'ql:completed', 0, now - max_age)) do
    forget_completed(old)
  end
  redis.call('zremrangebyscore', 'ql:completed', 0, now - max_age)
  for _, old in ipairs(redis.call('zrange', 'ql:completed', 0, -1 - max_count)) do
    forget_completed(old)
  end
  redis.call('zremrangebyrank', 'ql:completed', 0, -1 - max_count)
end

-- A job whose last dependency completed becomes waiting (or scheduled, if it was put with a delay).
local function release_dependents(now, jid)
  for _, dependent in ipairs(redis.call('smembers', job_key(jid, '-dependents'))) do
    redis.call('srem', job_key(dependent, '-dependencies'), jid)
    if redis.call('scard', job_key(dependent, '-dependencies')) == 0 then
      local queue, priority, scheduled =
        unpack(redis.call('hmget', job_key(dependent), 'queue', 'priority', 'scheduled'))
      if queue then
        set_remove(queue, 'depends', dependent)
        if scheduled then
          set_add(queue, 'scheduled', scheduled, dependent)
          redis.call('hset', job_key(dependent), 'state', 'scheduled')
          redis.call('hdel', job_key(dependent), 'scheduled')
        else
          work_add(queue, now, priority, dependent)
          redis.call('hset', job_key(dependent), 'state', 'waiting')
        end
      end
    end
  end
  redis.call('del', job_key(jid, '-dependents'))
end

function Q.complete(now, jid, worker, queue, raw_data, ...)
  local extra = { ... }
  assert(worker, 'Complete(): Arg "worker" missing')
  assert(queue, 'Complete(): Arg "queue" missing')
  assert(cjson.decode(raw_data), 'Complete(): Arg "data" missing or not JSON: ' .. tostring(raw_data))
  local options = pairs_to_options(extra, 1)
  local next_queue = options['next']
  local delay = assert(tonumber(options['delay'] or 0))
  local depends = assert(cjson.decode(options['depends'] or '[]'),
    'Complete(): Arg "depends" not JSON: ' .. tostring(options['depends']))
  if options['delay'] and next_queue == nil then
    error('Complete(): "delay" cannot be used without a "next".')
  end
  if options['depends'] and next_queue == nil then
    error('Complete(): "depends" cannot be used without a "next".')
  end

  local holder, state, priority, retries, current_queue = unpack(redis.call('hmget',
    job_key(jid), 'worker', 'state', 'priority', 'retries', 'queue'))
  if holder == false then
    error('Complete(): Job ' .. jid .. ' does not exist')
  elseif state ~= 'running' then
    error('Complete(): Job ' .. jid .. ' is not currently running: ' .. state)
  elseif holder ~= worker then
    error('Complete(): Job ' .. jid .. ' has been handed out to another worker: ' .. tostring(holder))
  elseif queue ~= current_queue then
    error('Complete(): Job ' .. jid .. ' running in another queue: ' .. tostring(current_queue))
  end

  history_add(jid, now, 'done')
  if raw_data then
    redis.call('hset', job_key(jid), 'data', raw_data)
  end
  set_remove(queue, 'work', jid)
  set_remove(queue, 'locks', jid)
  set_remove(queue, 'scheduled', jid)

  local since = tonumber(redis.call('hget', job_key(jid), 'time') or now)
  record_duration(queue, now, 'run', now - since)
  redis.call('hset', job_key(jid), 'time', string.format('%.20f', now))
  redis.call('zrem', worker_jobs_key(worker), jid)
  if is_tracked(jid) then
    publish('completed', jid)
  end

  if next_queue then
    if next_queue ~= queue then
      release_unique(jid, queue)
    end
    publish('log', cjson.encode({ jid = jid, event = 'advanced', queue = queue, to = next_queue }))
    history_add(jid, now, 'put', { q = next_queue })
    register_queue(next_queue, now)
    redis.call('hmset', job_key(jid),
      'state', 'waiting',
      'worker', '',
      'failure', '{}',
      'queue', next_queue,
      'expires', 0,
      'remaining', tonumber(retries))
    if delay > 0 and #depends == 0 then
      -- qless answers 'scheduled' here but leaves the state field at 'waiting'.
      set_add(next_queue, 'scheduled', now + delay, jid)
      return 'scheduled'
    end
    if link_dependencies(jid, depends) > 0 then
      set_add(next_queue, 'depends', now, jid)
      redis.call('hset', job_key(jid), 'state', 'depends')
      if delay > 0 then
        set_add(next_queue, 'depends', now, jid)
        redis.call('hset', job_key(jid), 'scheduled', now + delay)
      end
      return 'depends'
    end
    work_add(next_queue, now, priority, jid)
    return 'waiting'
  end

  publish('log', cjson.encode({ jid = jid, event = 'completed', queue = queue }))
  redis.call('hmset', job_key(jid),
    'state', 'complete',
    'worker', '',
    'failure', '{}',
    'queue', '',
    'expires', 0,
    'remaining', tonumber(retries))
  redis.call('zadd', 'ql:completed', now, jid)
  prune_completed(now)
  release_dependents(now, jid)
  return 'complete'
end

function Q.fail(now, jid, worker, group, message, data)
  assert(worker, 'Fail(): Arg "worker" missing')
  assert(group, 'Fail(): Arg "group" missing')
  assert(message, 'Fail(): Arg "message" missing')
  if data then
    data = cjson.decode(data)
  end

  local queue, state, holder = unpack(redis.call('hmget', job_key(jid), 'queue', 'state', 'worker'))
  -- The missing spaces in these two messages are qless's own.
  if not state then
    error('Fail(): Job ' .. jid .. 'does not exist')
  elseif state ~= 'running' then
    error('Fail(): Job ' .. jid .. 'not currently running: ' .. state)
  elseif worker ~= holder then
    error('Fail(): Job ' .. jid .. ' running with another worker: ' .. holder)
  end

  publish('log', cjson.encode({ jid = jid, event = 'failed', worker = worker, group = group, message = message }))
  if is_tracked(jid) then
    publish('failed', jid)
  end
  redis.call('zrem', worker_jobs_key(worker), jid)
  history_add(jid, now, 'failed', { worker = worker, group = group })
  count_failure(day_of(now), queue)
  set_remove(queue, 'work', jid)
  set_remove(queue, 'locks', jid)
  set_remove(queue, 'scheduled', jid)
  if data then
    redis.call('hset', job_key(jid), 'data', cjson.encode(data))
  end
  redis.call('hmset', job_key(jid),
    'state', 'failed',
    'worker', '',
    'expires', '',
    'failure', cjson.encode({ group = group, message = message, when = math.floor(now), worker = worker }))
  add_failure(group, jid)
  return jid
end

-- Gives a running job back, spending one retry; with none left the job fails.
function Q.retry(now, jid, queue, worker, delay, group, message)
  assert(queue, 'Retry(): Arg "queue" missing')
  assert(worker, 'Retry(): Arg "worker" missing')
  delay = assert(tonumber(delay or 0), 'Retry(): Arg "delay" not a number: ' .. tostring(delay))

  local old_queue, state, _, holder, priority = unpack(redis.call('hmget', job_key(jid),
    'queue', 'state', 'retries', 'worker', 'priority', 'failure'))
  if holder == false then
    error('Retry(): Job ' .. jid .. ' does not exist')
  elseif state ~= 'running' then
    error('Retry(): Job ' .. jid .. ' is not currently running: ' .. state)
  elseif holder ~= worker then
    error('Retry(): Job ' .. jid .. ' has been given to another worker: ' .. holder)
  end

  local remaining = tonumber(redis.call('hincrby', job_key(jid), 'remaining', -1))
  redis.call('hdel', job_key(jid), 'grace')
  set_remove(old_queue, 'locks', jid)
  redis.call('zrem', worker_jobs_key(worker), jid)

  if remaining < 0 then
    group = group or 'failed-retries-' .. queue
    history_add(jid, now, 'failed', { group = group })
    redis.call('hmset', job_key(jid), 'state', 'failed', 'worker', '', 'expires', '')
    if message ~= nil then
      redis.call('hset', job_key(jid), 'failure',
        cjson.encode({ group = group, message = message, when = math.floor(now), worker = worker }))
    else
      redis.call('hset', job_key(jid), 'failure', cjson.encode({
        group = group,
        message = 'Job exhausted retries in queue "' .. old_queue .. '"',
        when = now,
        worker = redis.call('hget', job_key(jid), 'worker'),
      }))
    end
    if is_tracked(jid) then
      publish('failed', jid)
    end
    add_failure(group, jid)
    count_failure(day_of(now), queue)
  else
    -- Requeued into the queue named by the caller; the job's queue field is left as it was.
    if delay > 0 then
      set_add(queue, 'scheduled', now + delay, jid)
      redis.call('hset', job_key(jid), 'state', 'scheduled')
    else
      work_add(queue, now, priority, jid)
      redis.call('hset', job_key(jid), 'state', 'waiting')
    end
    if group ~= nil and message ~= nil then
      redis.call('hset', job_key(jid), 'failure',
        cjson.encode({ group = group, message = message, when = math.floor(now), worker = worker }))
    end
  end
  return math.floor(remaining)
end
