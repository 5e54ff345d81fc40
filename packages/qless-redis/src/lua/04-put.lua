-- Part 4: put (also "move"/requeue) and unfail.

-- Links jid to each dependency that still exists and is not complete.
local function link_dependencies(jid, depends)
  local linked = 0
  for _, dep in ipairs(depends) do
    local state = redis.call('hget', job_key(dep), 'state')
    if state and state ~= 'complete' then
      linked = linked + 1
      redis.call('sadd', job_key(dep, '-dependents'), jid)
      redis.call('sadd', job_key(jid, '-dependencies'), dep)
    end
  end
  return linked
end

-- Tells the worker that held a job that it no longer does.
local function announce_lock_lost(jid, worker)
  local message = cjson.encode({ jid = jid, event = 'lock_lost', worker = worker })
  publish('w:' .. worker, message)
  publish('log', message)
end

-- The job hash a put writes: the job waiting (or `state`) in `queue`, with no worker or lock.
local function write_put(now, queue, jid, klass, raw_data, priority, tags, state, retries)
  redis.call('hmset', job_key(jid),
    'jid', jid,
    'klass', klass,
    'data', raw_data,
    'priority', priority,
    'tags', cjson.encode(tags),
    'state', state,
    'worker', '',
    'expires', 0,
    'queue', queue,
    'retries', retries,
    'remaining', retries,
    'time', string.format('%.20f', now))
end

function Q.put(now, worker, queue, jid, klass, raw_data, delay, ...)
  local extra = { ... }
  assert(jid, 'Put(): Arg "jid" missing')
  assert(klass, 'Put(): Arg "klass" missing')
  assert(cjson.decode(raw_data), 'Put(): Arg "data" missing or not JSON: ' .. tostring(raw_data))
  delay = assert(tonumber(delay), 'Put(): Arg "delay" not a number: ' .. tostring(delay))
  if #extra % 2 == 1 then
    error('Odd number of additional args: ' .. tostring(extra))
  end
  local options = pairs_to_options(extra, 1)

  local priority, tags, old_queue, old_state, failure, retries, old_worker = unpack(redis.call('hmget',
    job_key(jid), 'priority', 'tags', 'queue', 'state', 'failure', 'retries', 'worker'))

  -- The old tags are dropped first (and added back below when they are kept).
  if tags then
    Q.tag_remove(now, jid, unpack(cjson.decode(tags)))
  end

  -- Options not given keep the job's previous values (a move keeps priority, tags, retries).
  retries = assert(tonumber(options['retries'] or retries or 5),
    'Put(): Arg "retries" not a number: ' .. tostring(options['retries']))
  tags = assert(cjson.decode(options['tags'] or tags or '[]'),
    'Put(): Arg "tags" not JSON' .. tostring(options['tags']))
  priority = assert(tonumber(options['priority'] or priority or 0),
    'Put(): Arg "priority" not a number' .. tostring(options['priority']))
  local depends = assert(cjson.decode(options['depends'] or '[]'),
    'Put(): Arg "depends" not JSON: ' .. tostring(options['depends']))

  -- A new dependency list replaces the old one.
  if #depends > 0 then
    local wanted = {}
    for _, dep in ipairs(depends) do
      wanted[dep] = true
    end
    for _, dep in pairs(redis.call('smembers', job_key(jid, '-dependencies'))) do
      if not wanted[dep] then
        redis.call('srem', job_key(dep, '-dependents'), jid)
        redis.call('srem', job_key(jid, '-dependencies'), dep)
      end
    end
  end

  -- A job put into another queue leaves its unique key behind (read before the new put entry).
  if old_state and home_queue(jid) ~= queue then
    release_unique(jid)
  end

  publish('log', cjson.encode({ jid = jid, event = 'put', queue = queue }))
  history_add(jid, now, 'put', { q = queue })

  if old_queue then
    set_remove(old_queue, 'work', jid)
    set_remove(old_queue, 'locks', jid)
    set_remove(old_queue, 'depends', jid)
    set_remove(old_queue, 'scheduled', jid)
  end

  if old_worker and old_worker ~= '' then
    redis.call('zrem', worker_jobs_key(old_worker), jid)
    if old_worker ~= worker then
      announce_lock_lost(jid, old_worker)
    end
  end

  if old_state == 'complete' then
    redis.call('zrem', 'ql:completed', jid)
  end

  tag_index(jid, tags, now)

  if old_state == 'failed' then
    failure = cjson.decode(failure)
    drop_failure(jid, failure)
    -- The failed count is kept on the day the failure happened.
    redis.call('hincrby', stats_key(day_of(failure.when), queue), 'failed', -1)
  end

  local state = 'waiting'
  if delay > 0 then
    state = 'scheduled'
  end
  write_put(now, queue, jid, klass, raw_data, priority, tags, state, retries)

  link_dependencies(jid, depends)

  local waits = redis.call('scard', job_key(jid, '-dependencies')) > 0
  if delay > 0 then
    if waits then
      -- The delay starts counting only once the dependencies are done.
      set_add(queue, 'depends', now, jid)
      redis.call('hmset', job_key(jid), 'state', 'depends', 'scheduled', now + delay)
    else
      set_add(queue, 'scheduled', now + delay, jid)
    end
  elseif waits then
    set_add(queue, 'depends', now, jid)
    redis.call('hset', job_key(jid), 'state', 'depends')
  else
    work_add(queue, now, priority, jid)
  end

  register_queue(queue, now)
  if is_tracked(jid) then
    publish('put', jid)
  end
  return jid
end

-- Moves the oldest `count` jobs of a failure group into `queue`.
function Q.unfail(now, queue, group, count)
  assert(group, 'Unfail(): Arg "group" missing')
  count = assert(tonumber(count or 25), 'Unfail(): Arg "count" not a number: ' .. tostring(count))
  local list = 'ql:f:' .. group
  local jids = redis.call('lrange', list, -count, -1)
  for _, jid in ipairs(jids) do
    local doc = job_document(jid)
    history_add(jid, now, 'put', { q = queue })
    redis.call('hmset', job_key(doc.jid),
      'state', 'waiting',
      'worker', '',
      'expires', 0,
      'queue', queue,
      'remaining', doc.retries or 5)
    work_add(queue, now, doc.priority, doc.jid)
  end
  redis.call('ltrim', list, 0, -count - 1)
  if redis.call('llen', list) == 0 then
    redis.call('srem', 'ql:failures', group)
  end
  return #jids
end
