-- Part 8: read-mostly listings: jobs by state, failures, queue counts, workers, length.

function Q.jobs(now, state, ...)
  local args = { ... }
  assert(state, 'Jobs(): Arg "state" missing')
  if state == 'complete' then
    local offset = assert(tonumber(args[1] or 0), 'Jobs(): Arg "offset" not a number: ' .. tostring(args[1]))
    local count = assert(tonumber(args[2] or 25), 'Jobs(): Arg "count" not a number: ' .. tostring(args[2]))
    return redis.call('zrevrange', 'ql:completed', offset, offset + count - 1)
  end

  local queue = assert(args[1], 'Jobs(): Arg "queue" missing')
  local offset = assert(tonumber(args[2] or 0), 'Jobs(): Arg "offset" not a number: ' .. tostring(args[2]))
  local count = assert(tonumber(args[3] or 25), 'Jobs(): Arg "count" not a number: ' .. tostring(args[3]))
  if state == 'running' then
    return live_locks(queue, now, offset, count)
  elseif state == 'stalled' then
    return expired_locks(queue, now, offset, count)
  elseif state == 'scheduled' then
    promote_scheduled(now, queue, set_size(queue, 'scheduled'))
    return zrange_page(queue, 'scheduled', offset, count)
  elseif state == 'depends' then
    return zrange_page(queue, 'depends', offset, count)
  elseif state == 'recurring' then
    return redis.call('zrangebyscore', queue_key(queue, 'recur'), 0, '+inf', 'LIMIT', offset, count)
  end
  error('Jobs(): Unknown type "' .. state .. '"')
end

function Q.failed(group, start, limit)
  start = assert(tonumber(start or 0), 'Failed(): Arg "start" is not a number: ' .. (start or 'nil'))
  limit = assert(tonumber(limit or 25), 'Failed(): Arg "limit" is not a number: ' .. (limit or 'nil'))
  if group then
    return {
      total = redis.call('llen', 'ql:f:' .. group),
      jobs = redis.call('lrange', 'ql:f:' .. group, start, start + limit - 1),
    }
  end
  local groups = {}
  for _, name in ipairs(redis.call('smembers', 'ql:failures')) do
    groups[name] = redis.call('llen', 'ql:f:' .. name)
  end
  return groups
end

-- Counts of one queue (promoting due scheduled jobs first, as qless does), or of every queue.
function Q.queue_counts(now, queue)
  if queue then
    local stalled = redis.call('zcount', queue_key(queue, 'locks'), 0, now)
    promote_scheduled(now, queue, set_size(queue, 'scheduled'))
    return {
      name = queue,
      waiting = set_size(queue, 'work'),
      stalled = stalled,
      running = set_size(queue, 'locks') - stalled,
      scheduled = set_size(queue, 'scheduled'),
      depends = set_size(queue, 'depends'),
      recurring = set_size(queue, 'recur'),
      paused = is_paused(queue),
    }
  end
  local all = {}
  for _, name in ipairs(redis.call('zrange', 'ql:queues', 0, -1)) do
    all[#all + 1] = Q.queue_counts(now, name)
  end
  return all
end

function Q.length(queue)
  return set_size(queue, 'locks') + set_size(queue, 'work') + set_size(queue, 'scheduled')
end

-- Workers last seen more than `max-worker-age` ago are forgotten first. A job whose lock time has
-- passed counts as stalled for its worker.
function Q.workers(now, worker)
  local max_age = tonumber(config_get('max-worker-age', 86400))
  for _, old in ipairs(redis.call('zrangebyscore', 'ql:workers', 0, now - max_age)) do
    redis.call('del', worker_jobs_key(old))
  end
  redis.call('zremrangebyscore', 'ql:workers', 0, now - max_age)

  if worker then
    return {
      jobs = redis.call('zrevrangebyscore', worker_jobs_key(worker), now + 8640000, now),
      stalled = redis.call('zrevrangebyscore', worker_jobs_key(worker), now, 0),
    }
  end
  local all = {}
  for _, name in ipairs(redis.call('zrevrange', 'ql:workers', 0, -1)) do
    all[#all + 1] = {
      name = name,
      jobs = redis.call('zcount', worker_jobs_key(name), now, now + 8640000),
      stalled = redis.call('zcount', worker_jobs_key(name), 0, now),
    }
  end
  return all
end
