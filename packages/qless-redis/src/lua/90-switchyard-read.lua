-- Switchyard extension, part 1: reads for the core Backend (commands named switchyard.*).
-- They read the qless layout as it is; nothing here changes what qless commands do.
-- (The Switchyard job fields and home_queue() are in 01-base.lua.)

-- The qless job document plus what the core job model needs beyond it.
local function sy_document(jid)
  local doc = job_document(jid)
  if not doc then
    return nil
  end
  local extra = redis.call('hmget', job_key(jid), 'time', SY_META, SY_RESULT, SY_PROGRESS)
  return {
    job = doc,
    home = home_queue(jid),
    time = extra[1],
    meta = extra[2],
    result = extra[3],
    progress = extra[4],
    scheduled = redis.call('zscore', queue_key(doc.queue ~= '' and doc.queue or '-', 'scheduled'), jid),
  }
end

local function in_queue(jid, queue)
  return home_queue(jid) == queue
end

-- Failed jobs keep their queue field; qless indexes them by failure group only.
local function failed_jids(queue)
  local found = {}
  for _, group in ipairs(redis.call('smembers', 'ql:failures')) do
    for _, jid in ipairs(redis.call('lrange', 'ql:f:' .. group, 0, -1)) do
      if redis.call('hget', job_key(jid), 'queue') == queue then
        found[#found + 1] = jid
      end
    end
  end
  return found
end

-- Completed jobs, newest first, of this queue (ql:completed holds every queue's).
local function completed_jids(queue)
  local found = {}
  for _, jid in ipairs(redis.call('zrevrange', 'ql:completed', 0, -1)) do
    if in_queue(jid, queue) then
      found[#found + 1] = jid
    end
  end
  return found
end

local function jids_in_state(queue, state)
  if state == 'waiting' then
    return redis.call('zrevrange', queue_key(queue, 'work'), 0, -1)
  elseif state == 'delayed' then
    return redis.call('zrange', queue_key(queue, 'scheduled'), 0, -1)
  elseif state == 'active' then
    return redis.call('zrange', queue_key(queue, 'locks'), 0, -1)
  elseif state == 'blocked' then
    return redis.call('zrange', queue_key(queue, 'depends'), 0, -1)
  elseif state == 'failed' then
    return failed_jids(queue)
  elseif state == 'completed' then
    return completed_jids(queue)
  end
  return {}
end

local function page_of(jids, offset, count)
  local docs = {}
  for i = offset + 1, math.min(#jids, offset + count) do
    local doc = sy_document(jids[i])
    if doc then
      docs[#docs + 1] = doc
    end
  end
  return { docs = docs, more = #jids > offset + count }
end

API['switchyard.get'] = function(now, queue, jid)
  if not in_queue(jid, queue) then
    return nil
  end
  return cjson.encode(sy_document(jid))
end

-- The documents of several jids of the queue, in order; `false` for one the queue does not have.
API['switchyard.get-many'] = function(now, queue, jids_json)
  local docs = {}
  for i, jid in ipairs(cjson.decode(jids_json)) do
    docs[i] = in_queue(jid, queue) and sy_document(jid) or false
  end
  return cjson.encode(docs)
end

API['switchyard.list'] = function(now, queue, state, offset, count)
  return cjson.encode(page_of(jids_in_state(queue, state), tonumber(offset), tonumber(count)))
end

API['switchyard.counts'] = function(now, queue)
  return cjson.encode({
    waiting = set_size(queue, 'work'),
    delayed = set_size(queue, 'scheduled'),
    active = set_size(queue, 'locks'),
    blocked = set_size(queue, 'depends'),
    failed = #failed_jids(queue),
    completed = #completed_jids(queue),
    canceled = 0,
  })
end

-- An export walks a snapshot of the queue's jids taken by its first page: a sorted set whose members
-- all score 0, so they are kept (and paged) in jid order without sorting again on every page.
-- Membership is fixed when the walk starts, so a job that moves between states (or is deleted)
-- meanwhile is handed out exactly once (or not at all), never twice; jobs put after the snapshot
-- wait for the next export. The snapshot expires unless paged (EXPORT_TTL seconds) and is deleted
-- with the last page; a cursor that outlives it starts a new one from its last jid on.
local EXPORT_TTL = 900

local function export_key(token)
  return 'ql:sy:export:' .. token
end

local function snapshot_jids(key, queue, after)
  local batch = {}
  local function flush()
    if #batch > 0 then
      redis.call('zadd', key, unpack(batch))
      batch = {}
    end
  end
  for _, state in ipairs({ 'waiting', 'delayed', 'active', 'blocked', 'failed', 'completed' }) do
    for _, jid in ipairs(jids_in_state(queue, state)) do
      if jid > after then
        batch[#batch + 1] = 0
        batch[#batch + 1] = jid
        -- ZADD takes its arguments through unpack, which Lua caps near 8,000.
        if #batch >= 2000 then
          flush()
        end
      end
    end
  end
  flush()
end

-- One page of the export: the first `count` jids after `after` ('' for the first page) of the
-- snapshot `token`, as documents of jobs still in the queue. Answers {docs, more, last}.
API['switchyard.export'] = function(now, queue, token, after, count)
  count = tonumber(count)
  local key = export_key(token)
  if redis.call('exists', key) == 0 then
    snapshot_jids(key, queue, after)
  end
  local start = after == '' and '-' or '(' .. after
  local jids = redis.call('zrangebylex', key, start, '+', 'LIMIT', 0, count + 1)
  local docs = {}
  for i = 1, math.min(#jids, count) do
    -- A job deleted, or put into another queue, since the snapshot is no longer this queue's.
    if in_queue(jids[i], queue) then
      docs[#docs + 1] = sy_document(jids[i])
    end
  end
  local more = #jids > count
  if more then
    redis.call('expire', key, EXPORT_TTL)
  else
    redis.call('del', key)
  end
  return cjson.encode({ docs = docs, more = more, last = jids[math.min(#jids, count)] })
end

API['switchyard.queues'] = function(now)
  return redis.call('zrange', 'ql:queues', 0, -1)
end

-- Recurring jobs for core's RecurringJobs (a migration carries them): each definition as the raw
-- fields of ql:r:<jid>, then its score in its queue's -recur set, in a JSON list of strings.
local RECURRENCE_FIELDS = { 'jid', 'klass', 'queue', 'priority', 'interval', 'retries', 'count', 'data', 'tags', 'backlog' }

local function sy_recurrence(jid)
  local fields = redis.call('hmget', recurring_key(jid), unpack(RECURRENCE_FIELDS))
  if not fields[1] then
    return false
  end
  fields[#RECURRENCE_FIELDS + 1] = redis.call('zscore', queue_key(fields[3], 'recur'), jid)
  return fields
end

API['switchyard.recurrence'] = function(now, jid)
  return cjson.encode({ sy_recurrence(jid) })
end

API['switchyard.recurrences'] = function(now, queue)
  local found = {}
  for _, jid in ipairs(redis.call('zrange', queue_key(queue, 'recur'), 0, -1)) do
    found[#found + 1] = sy_recurrence(jid)
  end
  return cjson.encode(found)
end
