-- Part 7: operations on one job: heartbeat, priority, timeout, depends, cancel, log.

-- `lease_seconds` is Switchyard's extension (switchyard.heartbeat).
function Q.heartbeat(now, jid, worker, data, lease_seconds)
  assert(worker, 'Heatbeat(): Arg "worker" missing') -- sic: qless's spelling
  local queue = redis.call('hget', job_key(jid), 'queue') or ''
  local expires = now + (lease_seconds or heartbeat_seconds(queue))
  if data then
    data = cjson.decode(data)
  end

  local holder, state = unpack(redis.call('hmget', job_key(jid), 'worker', 'state'))
  if holder == false then
    error('Heartbeat(): Job ' .. jid .. ' does not exist')
  elseif state ~= 'running' then
    error('Heartbeat(): Job ' .. jid .. ' not currently running: ' .. state)
  elseif holder ~= worker or #holder == 0 then
    error('Heartbeat(): Job ' .. jid .. ' given out to another worker: ' .. holder)
  end

  if data then
    redis.call('hmset', job_key(jid), 'expires', expires, 'worker', worker, 'data', cjson.encode(data))
  else
    redis.call('hmset', job_key(jid), 'expires', expires, 'worker', worker)
  end
  redis.call('zadd', worker_jobs_key(worker), expires, jid)
  redis.call('zadd', 'ql:workers', now, worker)
  set_add(redis.call('hget', job_key(jid), 'queue'), 'locks', expires, jid)
  return expires
end

-- Changing the priority of a waiting job re-scores it with the bare priority (qless drops the
-- FIFO part here).
function Q.priority(jid, priority)
  priority = assert(tonumber(priority), 'Priority(): Arg "priority" missing or not a number: ' .. tostring(priority))
  local queue = redis.call('hget', job_key(jid), 'queue')
  if queue == nil or queue == false then
    error('Priority(): Job ' .. jid .. ' does not exist')
  end
  if queue ~= '' and redis.call('zscore', queue_key(queue, 'work'), jid) then
    work_add(queue, 0, priority, jid)
  end
  redis.call('hset', job_key(jid), 'priority', priority)
  return priority
end

-- Takes the lock away now: the job goes to the front of its queue (score +inf) as 'stalled'.
function Q.timeout(now, jid)
  local queue, state, worker = unpack(redis.call('hmget', job_key(jid), 'queue', 'state', 'worker'))
  if queue == nil or queue == false then
    error('Timeout(): Job ' .. jid .. ' does not exist')
  elseif state ~= 'running' then
    error('Timeout(): Job ' .. jid .. ' not running')
  end
  history_add(jid, now, 'timed-out')
  set_remove(queue, 'locks', jid)
  work_add(queue, now, '+inf', jid)
  redis.call('hmset', job_key(jid), 'state', 'stalled', 'expires', 0)
  announce_lock_lost(jid, worker)
  return queue
end

-- Once no dependency is left the job waits in its queue; a pending delay is dropped.
local function release_if_free(now, jid)
  local queue, priority = unpack(redis.call('hmget', job_key(jid), 'queue', 'priority'))
  if queue then
    set_remove(queue, 'depends', jid)
    work_add(queue, now, priority, jid)
    redis.call('hset', job_key(jid), 'state', 'waiting')
  end
end

function Q.depends(now, jid, command, ...)
  local jids = { ... }
  assert(command, 'Depends(): Arg "command" missing')
  local state = redis.call('hget', job_key(jid), 'state')
  if state ~= 'depends' then
    error('Depends(): Job ' .. jid .. ' not in the depends state: ' .. tostring(state))
  end

  if command == 'on' then
    link_dependencies(jid, jids)
    return true
  elseif command == 'off' then
    if jids[1] == 'all' then
      for _, dep in ipairs(redis.call('smembers', job_key(jid, '-dependencies'))) do
        redis.call('srem', job_key(dep, '-dependents'), jid)
      end
      redis.call('del', job_key(jid, '-dependencies'))
      release_if_free(now, jid)
    else
      for _, dep in ipairs(jids) do
        redis.call('srem', job_key(dep, '-dependents'), jid)
        redis.call('srem', job_key(jid, '-dependencies'), dep)
        if redis.call('scard', job_key(jid, '-dependencies')) == 0 then
          release_if_free(now, jid)
        end
      end
    end
    return true
  end
  error('Depends(): Argument "command" must be "on" or "off"')
end

-- Cancels jobs for good. A job with dependents can only go together with all of them;
-- a complete job is left alone.
function Q.cancel(jids)
  local dependents_of = {}
  for _, jid in ipairs(jids) do
    dependents_of[jid] = redis.call('smembers', job_key(jid, '-dependents')) or {}
  end
  for _, jid in ipairs(jids) do
    for _, dependent in ipairs(dependents_of[jid]) do
      if not dependents_of[dependent] then
        error('Cancel(): ' .. jid .. ' is a dependency of ' .. dependent .. ' but is not mentioned to be canceled')
      end
    end
  end

  for _, jid in ipairs(jids) do
    local state, queue, failure, worker =
      unpack(redis.call('hmget', job_key(jid), 'state', 'queue', 'failure', 'worker'))
    if state ~= 'complete' then
      local message = cjson.encode({ jid = jid, worker = worker, event = 'canceled', queue = queue })
      publish('log', message)
      if worker and worker ~= '' then
        redis.call('zrem', worker_jobs_key(worker), jid)
        publish('w:' .. worker, message)
      end
      if queue then
        set_remove(queue, 'work', jid)
        set_remove(queue, 'locks', jid)
        set_remove(queue, 'scheduled', jid)
        set_remove(queue, 'depends', jid)
      end
      for _, dep in ipairs(redis.call('smembers', job_key(jid, '-dependencies'))) do
        redis.call('srem', job_key(dep, '-dependents'), jid)
      end
      redis.call('del', job_key(jid, '-dependencies'))
      if state == 'failed' then
        failure = cjson.decode(failure)
        drop_failure(jid, failure)
        local key = stats_key(day_of(failure.when), queue)
        redis.call('hset', key, 'failed', redis.call('hget', key, 'failed') - 1)
      end
      untag_index(jid, cjson.decode(redis.call('hget', job_key(jid), 'tags') or '{}'))
      if is_tracked(jid) then
        publish('canceled', jid)
      end
      release_unique(jid)
      redis.call('del', job_key(jid))
      redis.call('del', job_key(jid, '-history'))
    end
  end
  return jids
end

function Q.log(now, jid, message, data)
  assert(jid, "Log(): Argument 'jid' missing")
  assert(message, "Log(): Argument 'message' missing")
  if data then
    data = assert(cjson.decode(data), "Log(): Argument 'data' not cjson: " .. tostring(data))
  end
  assert(job_exists(jid), 'Log(): Job ' .. jid .. ' does not exist')
  history_add(jid, now, message, data)
end
