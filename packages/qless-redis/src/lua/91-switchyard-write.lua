-- Switchyard extension, part 2: the core Backend's writes, each one atomic. They are built from
-- the same operations as the qless commands, so the stored layout is the one qless writes.

local function must_be_in_queue(command, jid, queue)
  if not in_queue(jid, queue) then
    error(command .. '(): Job ' .. jid .. ' does not exist')
  end
end

-- The worker named by the caller, or (when none is given) whoever holds the job now.
local function acting_worker(jid, worker)
  if worker ~= '' then
    return worker
  end
  return redis.call('hget', job_key(jid), 'worker') or ''
end

-- The jid holding the unique key in this queue, or nil. A key is held while its job is unfinished:
-- an entry whose job is gone, finished (complete, or failed for good) or no longer in this queue
-- (a qless worker moved it on with `complete ... next`, or re-put it elsewhere) is stale, and the
-- next job with the key takes it over.
local function unique_holder(queue, unique)
  local holder = redis.call('hget', unique_hash(queue), unique)
  if not holder or not in_queue(holder, queue) then
    return nil
  end
  local state = redis.call('hget', job_key(holder), 'state')
  if state == 'complete' or state == 'failed' then
    return nil
  end
  return holder
end

-- Appends a waiting job's place in the work set to `work` (score, jid pairs), for add_work.
local function append_work(work, now, priority, jid)
  work[#work + 1] = work_score(now, priority)
  work[#work + 1] = jid
end

-- Adds a page's waiting jobs to the queue's work set (score, jid pairs), in ZADDs of at most
-- 1,000 members: Lua's unpack is capped near 8,000 values.
local function add_work(queue, work)
  for first = 1, #work, 2000 do
    redis.call('zadd', queue_key(queue, 'work'), unpack(work, first, math.min(#work, first + 1999)))
  end
end

-- Q.put of a jid that no job holds, without dependencies: Q.put's reads of the old job (its fields,
-- its history to trim, its dependencies) would find nothing, so they are left out; the keys written,
-- their values and the messages published are Q.put's. A waiting job's place in the work set is
-- appended to `work` (score, jid) for one ZADD per call (add_work). `first` registers the queue (the
-- batch's first put; the others would find it registered); `watched` says whether any jid is
-- tracked at all. Answers whether this one is.
local function put_new(now, queue, jid, klass, raw_data, delay, priority, tags_json, retries, work, first, watched)
  local tags = cjson.decode(tags_json)
  publish('log', cjson.encode({ jid = jid, event = 'put', queue = queue }))
  redis.call('rpush', job_key(jid, '-history'), cjson.encode({ math.floor(now), 'put', { q = queue } }))
  tag_index(jid, tags, now)
  write_put(now, queue, jid, klass, raw_data, priority, tags, delay > 0 and 'scheduled' or 'waiting', retries)
  if delay > 0 then
    set_add(queue, 'scheduled', now + delay, jid)
  else
    append_work(work, now, priority, jid)
  end
  if first then
    register_queue(queue, now)
  end
  local tracked = watched and is_tracked(jid)
  if tracked then
    publish('put', jid)
  end
  return tracked
end

-- Enqueues a batch, all or nothing. `items` is a JSON array of
-- {now, jid, klass, delay, priority, tags, retries, depends, unique, meta, build}, every value a
-- string as put takes it; `now` is the item's own put time, so equal priorities keep batch order.
-- Item i's data is the i-th line of `data_lines`, as put stores it: outside `items_json`, where the
-- caller would escape it and cjson unescape it (JSON.stringify writes no raw line break), and one
-- argument whatever the batch's size (Lua unpacks at most about 8,000 arguments). It is not decoded:
-- put decodes data only to refuse what is not JSON; the Backend sends JSON.stringify of data it has
-- checked and refuses first what cjson would refuse of that (backend.ts, qlessDataProblem). The
-- decoding cost Redis about as much as the rest of the put (55 of 115 us per job of 2.5 KB).
-- Each job is created unless its unique key (in this queue) or its jid is taken already, by an
-- existing job or an earlier item of the batch; then the holder answers. A jid of another queue
-- is an error. Every item is decided before anything is written, because a script
-- error does not undo the writes made before it. Answers [{created = 1|0, doc = document}, ...].
API['switchyard.enqueue-many'] = function(now, queue, items_json, data_lines)
  local items, data, from = cjson.decode(items_json), {}, 1
  for i = 1, #items do
    local to = string.find(data_lines, '\n', from, true) or #data_lines + 1
    data[i] = string.sub(data_lines, from, to - 1)
    from = to + 1
  end
  local answer_jid, creates = {}, {}
  local batch_jids, batch_unique = {}, {}
  for i, item in ipairs(items) do
    local existing = nil
    if item.unique ~= '' then
      existing = unique_holder(queue, item.unique) or batch_unique[item.unique]
    end
    if not existing and batch_jids[item.jid] then
      existing = item.jid
    elseif not existing and job_exists(item.jid) then
      if not in_queue(item.jid, queue) then
        error('Enqueue(): Job ' .. item.jid .. ' is taken by a job of another queue')
      end
      existing = item.jid
    end
    if not existing then
      if data[i] == '' or data[i] == 'false' then
        error('Put(): Arg "data" missing or not JSON: ' .. data[i])
      end
      batch_jids[item.jid] = true
      if item.unique ~= '' then
        batch_unique[item.unique] = item.jid
      end
      creates[i] = true
    end
    answer_jid[i] = existing or item.jid
  end

  local tracked, registered, work = {}, false, {}
  local watched = redis.call('zcard', 'ql:tracked') > 0
  for i, item in ipairs(items) do
    if creates[i] then
      if item.depends == '[]' then
        tracked[i] = put_new(tonumber(item.now), queue, item.jid, item.klass, data[i], tonumber(item.delay),
          tonumber(item.priority), item.tags, tonumber(item.retries), work, not registered, watched)
        registered = true
      else
        Q.put(tonumber(item.now), '', queue, item.jid, item.klass, data[i], item.delay, 'priority', item.priority,
          'tags', item.tags, 'retries', item.retries, 'depends', item.depends)
        tracked[i] = is_tracked(item.jid)
      end
      if item.meta ~= '' then
        redis.call('hset', job_key(item.jid), SY_META, item.meta)
      end
      if item.unique ~= '' then
        redis.call('hset', unique_hash(queue), item.unique, item.jid)
      end
    end
  end

  add_work(queue, work)

  -- A created job whose caller builds it from what it sent (item.build, see created.ts) is answered
  -- by its `time` field alone, unless someone tracks its jid: reading back and encoding every new
  -- job cost as much as writing it.
  local answers = {}
  for i, item in ipairs(items) do
    if creates[i] and item.build == '1' and not tracked[i] then
      answers[i] = { created = 1, time = string.format('%.20f', tonumber(item.now)) }
    else
      answers[i] = { created = creates[i] and 1 or 0, doc = sy_document(answer_jid[i]) }
    end
  end
  return cjson.encode(answers)
end

-- The documents of the jobs a pop leases to `worker`.
local function sy_pop(now, queue, worker, count, lease_seconds)
  local docs = {}
  for _, jid in ipairs(Q.pop(now, queue, worker, count, tonumber(lease_seconds))) do
    docs[#docs + 1] = sy_document(jid)
  end
  return docs
end

API['switchyard.pop'] = function(now, queue, worker, count, lease_seconds)
  return cjson.encode(sy_pop(now, queue, worker, count, lease_seconds))
end

API['switchyard.heartbeat'] = function(now, queue, jid, worker, lease_seconds)
  must_be_in_queue('Heartbeat', jid, queue)
  Q.heartbeat(now, jid, worker, nil, tonumber(lease_seconds))
  return cjson.encode(sy_document(jid))
end

API['switchyard.progress'] = function(now, queue, jid, worker, progress)
  must_be_in_queue('Progress', jid, queue)
  local state, holder = unpack(redis.call('hmget', job_key(jid), 'state', 'worker'))
  if state ~= 'running' then
    error('Progress(): Job ' .. jid .. ' not currently running: ' .. state)
  elseif worker ~= '' and holder ~= worker then
    error('Progress(): Job ' .. jid .. ' given out to another worker: ' .. holder)
  end
  redis.call('hset', job_key(jid), SY_PROGRESS, progress)
  return cjson.encode(sy_document(jid))
end

-- Whether completing a job at `now` may prune it at once (prune_completed keeps the newest
-- jobs-history-count completions of the last jobs-history seconds): only with either at 0, or with
-- that many completions dated at or after now (another client's clock ahead). Then its document
-- must be read before; otherwise that read (seven commands and the history's decoding) is spared:
-- complete-and-pop 285 -> 278 µs of Redis's time a call, one worker in sequence (2026-11-29).
local function may_prune_at_once(now)
  local max_count = tonumber(config_get('jobs-history-count') or 50000)
  local max_age = tonumber(config_get('jobs-history') or 7 * 24 * 60 * 60)
  -- From a second before now: a number goes to Redis as 14 digits, which may round now up past a tie.
  return max_age <= 0 or max_count <= 0 or redis.call('zcount', 'ql:completed', now - 1, '+inf') >= max_count
end

-- Completes with the job's own data (qless would replace data with what complete is given);
-- the core result goes to its own field. Answers the completed job's document.
local function sy_complete(now, queue, jid, worker, result)
  must_be_in_queue('Complete', jid, queue)
  local data = redis.call('hget', job_key(jid), 'data')
  local before = may_prune_at_once(now) and sy_document(jid)
  Q.complete(now, jid, acting_worker(jid, worker), queue, data)
  if before and not job_exists(jid) then
    -- Pruned at once (jobs-history-count 0 or jobs-history 0): answer with what it became.
    before.job.state, before.job.worker, before.job.queue = 'complete', '', ''
    before.time = string.format('%.20f', now)
    if result ~= '' then
      before.result = result
    end
    return before
  end
  if result ~= '' then
    redis.call('hset', job_key(jid), SY_RESULT, result)
  end
  return sy_document(jid)
end

API['switchyard.complete'] = function(now, queue, jid, worker, result)
  return cjson.encode(sy_complete(now, queue, jid, worker, result))
end

-- A worker's cycle in one call: the completion, then (only once it succeeded: a refused one raises
-- before writing) the pop of its next jobs.
API['switchyard.complete-and-pop'] = function(now, queue, jid, worker, result, next_worker, count, lease_seconds)
  local completed = sy_complete(now, queue, jid, worker, result)
  return cjson.encode({ completed = completed, next = sy_pop(now, queue, next_worker, count, lease_seconds) })
end

-- retry = '1' spends one qless retry (failing for good when none is left); '0' fails at once.
API['switchyard.fail'] = function(now, queue, jid, worker, group, message, retry, delay)
  must_be_in_queue('Fail', jid, queue)
  worker = acting_worker(jid, worker)
  local state, holder = unpack(redis.call('hmget', job_key(jid), 'state', 'worker'))
  if state ~= 'running' then
    error('Fail(): Job ' .. jid .. ' is not currently running: ' .. state)
  elseif holder ~= worker then
    error('Fail(): Job ' .. jid .. ' has been handed out to another worker: ' .. holder)
  end
  if retry == '1' then
    Q.retry(now, jid, queue, worker, delay, group, message)
  else
    Q.fail(now, jid, worker, group, message)
  end
  return cjson.encode(sy_document(jid))
end

-- The core contract withdraws only unfinished jobs, so a completed or failed job is refused
-- (qless's own cancel command, which qless clients use, still deletes a failed job).
API['switchyard.cancel'] = function(now, queue, jid)
  must_be_in_queue('Cancel', jid, queue)
  local state = redis.call('hget', job_key(jid), 'state')
  if state == 'complete' or state == 'failed' then
    error('Cancel(): Job ' .. jid .. ' is not currently cancelable: ' .. state)
  end
  Q.cancel({ jid })
  return 1
end

-- qless jids are global: before a job is imported into another queue of the same Redis, its
-- old record is taken out of every index (as put does when it moves a job), then deleted.
local function detach_job(jid)
  local queue, state, worker, failure, tags = unpack(redis.call('hmget', job_key(jid),
    'queue', 'state', 'worker', 'failure', 'tags'))
  release_unique(jid)
  if queue and queue ~= '' then
    for _, kind in ipairs({ 'work', 'locks', 'scheduled', 'depends' }) do
      set_remove(queue, kind, jid)
    end
  end
  if worker and worker ~= '' then
    redis.call('zrem', worker_jobs_key(worker), jid)
    announce_lock_lost(jid, worker)
  end
  if state == 'failed' and failure then
    failure = cjson.decode(failure)
    drop_failure(jid, failure)
    redis.call('hincrby', stats_key(day_of(failure.when), queue), 'failed', -1)
  elseif state == 'complete' then
    redis.call('zrem', 'ql:completed', jid)
  end
  untag_index(jid, cjson.decode(tags or '{}'))
  for _, dep in ipairs(redis.call('smembers', job_key(jid, '-dependencies'))) do
    redis.call('srem', job_key(dep, '-dependents'), jid)
  end
  redis.call('del', job_key(jid), job_key(jid, '-history'), job_key(jid, '-dependencies'))
end

-- A blocked job's parents may arrive on a later page of the same migration: one the target does not
-- hold yet is linked all the same (the job was blocked on it in the source, so it was unfinished),
-- and its completion releases the job as qless's own does. Only a parent held complete is not.
local function link_imported_dependencies(jid, depends)
  local linked = 0
  for _, dep in ipairs(depends) do
    if redis.call('hget', job_key(dep), 'state') ~= 'complete' then
      linked = linked + 1
      redis.call('sadd', job_key(dep, '-dependents'), jid)
      redis.call('sadd', job_key(jid, '-dependencies'), dep)
    end
  end
  return linked
end

-- A waiting imported job's place in the work set: at once, or (a page's import) appended to `work`.
local function join_work(queue, r, work)
  if work then
    append_work(work, r.created, r.priority, r.jid)
  else
    work_add(queue, r.created, r.priority, r.jid)
  end
end

-- Writes one job as it was exported (possibly from another system), unless the queue already
-- has that jid. The record is JSON built by the adapter; strings such as data stay byte for byte.
-- Its unique key is registered as enqueue registers it (whatever the job's state, since enqueue's
-- key outlives the job's run), unless an existing job of the queue already holds the key: that
-- job keeps it, as enqueue would have answered with it. With `work` (a page's import), a waiting
-- job's place in the work set is appended to it as score, jid, for one ZADD per page (add_work).
-- Answers 1 and the state the job was stored in, or 0 when the queue had the jid.
local function import_record(now, queue, r, work)
  if job_exists(r.jid) then
    if in_queue(r.jid, queue) then
      return 0
    end
    detach_job(r.jid)
  end
  local key, state = job_key(r.jid), r.state
  -- One HMSET for the whole record: the optional fields follow in the order separate HSETs gave them.
  local fields = { 'jid', r.jid, 'klass', r.klass, 'data', r.data, 'priority', r.priority, 'tags', cjson.encode(r.tags),
    'state', r.state, 'worker', r.worker or '', 'expires', r.expires or 0, 'queue', queue, 'retries', r.retries,
    'remaining', r.remaining, 'time', string.format('%.20f', r.time) }
  if r.spawned ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'spawned_from_jid', r.spawned
  end
  if r.failure ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'failure', r.failure
  end
  if r.progress ~= '' then
    fields[#fields + 1], fields[#fields + 2] = SY_PROGRESS, r.progress
  end
  if r.meta ~= '' then
    fields[#fields + 1], fields[#fields + 2] = SY_META, r.meta
  end
  if r.result ~= '' then
    fields[#fields + 1], fields[#fields + 2] = SY_RESULT, r.result
  end
  redis.call('hmset', key, unpack(fields))
  if #r.history > 0 then
    redis.call('rpush', job_key(r.jid, '-history'), unpack(r.history))
  end
  tag_index(r.jid, r.tags, now)

  if r.state == 'scheduled' then
    set_add(queue, 'scheduled', r.run_at, r.jid)
  elseif r.state == 'depends' then
    if link_imported_dependencies(r.jid, r.depends) > 0 then
      set_add(queue, 'depends', now, r.jid)
    else
      state = 'waiting'
      redis.call('hset', key, 'state', state)
      join_work(queue, r, work)
    end
  elseif r.state == 'failed' then
    local failure = cjson.decode(r.failure)
    redis.call('hset', key, 'expires', '')
    add_failure(failure.group, r.jid)
    redis.call('hincrby', stats_key(day_of(failure.when), queue), 'failed', 1)
  elseif r.state == 'complete' then
    -- As qless's complete leaves it: no queue, an empty failure. qless finds a completed job's queue
    -- in the last put of its history; only a job whose history names no put into this queue (one
    -- from another system, or renamed on the way) needs it said in switchyard.queue.
    redis.call('hset', key, 'queue', '')
    if r.failure == '' then
      redis.call('hset', key, 'failure', '{}')
    end
    if home_queue(r.jid) ~= queue then
      redis.call('hset', key, SY_QUEUE, queue)
    end
    redis.call('zadd', 'ql:completed', r.finished, r.jid)
  else
    join_work(queue, r, work)
  end
  if r.unique ~= '' and not unique_holder(queue, r.unique) then
    redis.call('hset', unique_hash(queue), r.unique, r.jid)
  end
  return 1, state
end

API['switchyard.import'] = function(now, queue, record_json)
  local written = import_record(now, queue, cjson.decode(record_json))
  if written == 1 then
    register_queue(queue, now)
  end
  return written
end

-- What a migration checks of a job the queue holds, read from its stored record (heldJob in
-- job-mapping.ts maps it): {klass, data, priority, state, time, history entries, scheduled score},
-- or false when the queue holds no such job.
local function held_record(queue, jid)
  local f = redis.call('hmget', job_key(jid), 'klass', 'data', 'priority', 'state', 'queue', 'time')
  if not f[1] or (f[5] ~= queue and not in_queue(jid, queue)) then
    return false
  end
  local scheduled = redis.call('zscore', queue_key(f[5] ~= '' and f[5] or '-', 'scheduled'), jid)
  return { f[1], f[2], f[3], f[4], f[6], redis.call('lrange', job_key(jid, '-history'), 0, -1), scheduled }
end

-- A page of records in one call, in order. Answers {1, state stored} for each record written (its
-- stored fields are the record's, which the caller maps as it maps a stored record: reading them back
-- and encoding them cost a quarter of the import), or {0, held} when the queue had the jid, held being
-- what the queue holds under it (held_record), read once the whole page is written. The waiting jobs
-- join the work set in one ZADD and the queue is registered once, for the page.
API['switchyard.import-many'] = function(now, queue, records_json)
  local records, written, stored, work = cjson.decode(records_json), {}, {}, {}
  for i, r in ipairs(records) do
    written[i], stored[i] = import_record(now, queue, r, work)
  end
  add_work(queue, work)
  if next(stored) then
    register_queue(queue, now)
  end
  local answers = {}
  for i, r in ipairs(records) do
    answers[i] = written[i] == 1 and { 1, stored[i] } or { 0, held_record(queue, r.jid) }
  end
  return answers
end

-- Deletes jobs of the queue outright (a migration's move mode), unless a worker holds them.
-- Returns the jids removed, as JSON.
API['switchyard.remove'] = function(now, queue, jids_json)
  local removed = {}
  for _, jid in ipairs(cjson.decode(jids_json)) do
    if in_queue(jid, queue) and redis.call('hget', job_key(jid), 'state') ~= 'running' then
      detach_job(jid)
      removed[#removed + 1] = jid
    end
  end
  return cjson.encode(removed)
end

-- A recurring job's definition written as recur writes it, with its count and next run as given
-- (a migration carries both); it leaves the queue it was in. Numbers are written as Lua numbers and
-- the tags encoded here, so the hash spells them as recur's (0.7 as 0.69999999999999996).
API['switchyard.put-recurrence'] = function(now, jid, queue, klass, data, priority, tags_json, retries, interval, score, count, backlog)
  local key = recurring_key(jid)
  local old_queue = redis.call('hget', key, 'queue')
  if old_queue then
    set_remove(old_queue, 'recur', jid)
  end
  redis.call('hmset', key,
    'jid', jid,
    'klass', klass,
    'data', data,
    'priority', tonumber(priority),
    'tags', cjson.encode(cjson.decode(tags_json)),
    'state', 'recur',
    'queue', queue,
    'type', 'interval',
    'count', tonumber(count),
    'interval', tonumber(interval),
    'retries', tonumber(retries),
    'backlog', tonumber(backlog))
  set_add(queue, 'recur', score, jid)
  register_queue(queue, now)
  return 1
end

-- unrecur, answering whether there was one.
API['switchyard.remove-recurrence'] = function(now, jid)
  local queue = redis.call('hget', recurring_key(jid), 'queue')
  if not queue then
    return 0
  end
  set_remove(queue, 'recur', jid)
  redis.call('del', recurring_key(jid))
  return 1
end

-- Instances added by another process: count and next run move only from the count it saw.
API['switchyard.advance-recurrence'] = function(now, jid, seen, count, score)
  local key = recurring_key(jid)
  local held, queue = unpack(redis.call('hmget', key, 'count', 'queue'))
  if not held or tonumber(held) ~= tonumber(seen) then
    return 0
  end
  redis.call('hset', key, 'count', count)
  set_add(queue, 'recur', score, jid)
  return 1
end
