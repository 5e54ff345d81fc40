-- Switchyard's qless-compatible command script, part 1: names, keys, config, history, job reads.
-- The .lua files of this folder are concatenated in file-name order into ONE script that is
-- called the way qless clients call qless.lua: EVALSHA <sha> 0 <command> <now> <args...>.
-- Everything is local (Redis >= 6.2.7 forbids touching globals such as `table`).

local JOB_NS = 'ql:j:'
local QUEUE_NS = 'ql:q:'

local Q = {}   -- internal operations, grouped by concern in the files that follow
local API = {} -- the public commands, filled in by 99-dispatch.lua

local function job_key(jid, suffix)
  return JOB_NS .. jid .. (suffix or '')
end

local function queue_key(queue, kind)
  return QUEUE_NS .. queue .. '-' .. kind
end

local function worker_jobs_key(worker)
  return 'ql:w:' .. worker .. ':jobs'
end

-- Channels are always in the ql: namespace, as qless workers subscribe there.
local function publish(channel, message)
  redis.call('publish', 'ql:' .. channel, message)
end

local function is_tracked(jid)
  return redis.call('zscore', 'ql:tracked', jid) ~= false
end

-- Statistics are binned per UTC day.
local function day_of(t)
  return t - (t % 86400)
end

local function append_all(list, items)
  for _, item in ipairs(items) do
    list[#list + 1] = item
  end
end

-- Name/value option pairs after the fixed arguments of put, complete and recur.
local function pairs_to_options(args, first)
  local options = {}
  for i = first, #args, 2 do
    options[args[i]] = args[i + 1]
  end
  return options
end

-- The same checks qless makes before building a job or queue handle.
local function need_jid(jid)
  return assert(jid, 'Job(): no jid provided')
end

local function need_queue(name)
  return assert(name, 'Queue(): no queue name provided')
end

local function need_recurring_jid(jid)
  return assert(jid, 'Recurring(): no jid provided')
end

-------------------------------------------------------------------------------
-- Configuration: the ql:config hash over built-in defaults.
-------------------------------------------------------------------------------
local function config_defaults()
  return {
    ['application'] = 'qless',
    ['heartbeat'] = 60,
    ['grace-period'] = 10,
    ['stats-history'] = 30,
    ['histogram-history'] = 7,
    ['jobs-history-count'] = 50000,
    ['jobs-history'] = 604800,
  }
end

local function config_get(option, fallback)
  return redis.call('hget', 'ql:config', option) or config_defaults()[option] or fallback
end

local function config_all()
  local merged = config_defaults()
  local flat = redis.call('hgetall', 'ql:config')
  for i = 1, #flat, 2 do
    merged[flat[i]] = flat[i + 1]
  end
  return merged
end

local function config_set(option, value)
  assert(option, 'config.set(): Arg "option" missing')
  assert(value, 'config.set(): Arg "value" missing')
  publish('log', cjson.encode({ event = 'config_set', option = option, value = value }))
  redis.call('hset', 'ql:config', option, value)
end

local function config_unset(option)
  assert(option, 'config.unset(): Arg "option" missing')
  publish('log', cjson.encode({ event = 'config_unset', option = option }))
  redis.call('hdel', 'ql:config', option)
end

-- Heartbeat length for a queue: the per-queue setting first, then the global one.
local function heartbeat_seconds(queue)
  return tonumber(config_get(queue .. '-heartbeat') or config_get('heartbeat', 60))
end

-------------------------------------------------------------------------------
-- History: a capped list of JSON arrays [floor(when), what, details?].
-------------------------------------------------------------------------------

-- Very old qless versions kept history as a JSON blob in the job hash; move it to the list.
local function migrate_blob_history(jid)
  local blob = redis.call('hget', job_key(jid), 'history')
  if not blob then
    return
  end
  local list = job_key(jid, '-history')
  for _, old in ipairs(cjson.decode(blob)) do
    redis.call('rpush', list, cjson.encode({ math.floor(old.put), 'put', { q = old.q } }))
    if old.popped then
      redis.call('rpush', list, cjson.encode({ math.floor(old.popped), 'popped', { worker = old.worker } }))
    end
    if old.failed then
      redis.call('rpush', list, cjson.encode({ math.floor(old.failed), 'failed', nil }))
    end
    if old.done then
      redis.call('rpush', list, cjson.encode({ math.floor(old.done), 'done', nil }))
    end
  end
  redis.call('hdel', job_key(jid), 'history')
end

local function history_read(jid)
  migrate_blob_history(jid)
  local entries = {}
  for _, raw in ipairs(redis.call('lrange', job_key(jid, '-history'), 0, -1)) do
    local entry = cjson.decode(raw)
    local shown = entry[3] or {}
    shown['when'] = entry[1]
    shown['what'] = entry[2]
    entries[#entries + 1] = shown
  end
  return entries
end

-- Appends an entry; past `max-job-history` entries the oldest are dropped, but the very first
-- entry (the original put) is always kept.
local function history_add(jid, now, what, details)
  migrate_blob_history(jid)
  local list = job_key(jid, '-history')
  local cap = tonumber(config_get('max-job-history', 100))
  if cap > 0 then
    local first = redis.call('lpop', list)
    redis.call('ltrim', list, -cap + 2, -1)
    if first ~= nil and first ~= false then
      redis.call('lpush', list, first)
    end
  end
  return redis.call('rpush', list, cjson.encode({ math.floor(now), what, details }))
end

-------------------------------------------------------------------------------
-- The job document as qless clients receive it.
-------------------------------------------------------------------------------
local function job_exists(jid)
  return redis.call('exists', job_key(jid)) == 1
end

local function job_document(jid)
  local f = redis.call('hmget', job_key(jid), 'jid', 'klass', 'state', 'queue', 'worker',
    'priority', 'expires', 'retries', 'remaining', 'data', 'tags', 'failure', 'spawned_from_jid')
  if not f[1] then
    return nil
  end
  return {
    jid = f[1],
    klass = f[2],
    state = f[3],
    queue = f[4],
    worker = f[5] or '',
    tracked = is_tracked(jid),
    priority = tonumber(f[6]),
    expires = tonumber(f[7]) or 0,
    retries = tonumber(f[8]),
    remaining = math.floor(tonumber(f[9])),
    data = f[10],
    tags = cjson.decode(f[11]),
    history = history_read(jid),
    failure = cjson.decode(f[12] or '{}'),
    spawned_from_jid = f[13],
    dependents = redis.call('smembers', job_key(jid, '-dependents')),
    dependencies = redis.call('smembers', job_key(jid, '-dependencies')),
  }
end

local function job_documents(jids)
  local docs = {}
  for _, jid in ipairs(jids) do
    local doc = job_document(need_jid(jid))
    if doc then
      docs[#docs + 1] = doc
    end
  end
  return docs
end

-- Switchyard's extra job fields (qless never reads them, and only jobs that need them get them):
-- switchyard.meta (backoff, unique key, foreign fields), switchyard.result, switchyard.progress,
-- switchyard.queue (queue of an imported completed job). They are named here because qless's own
-- put, complete, cancel and prune free a job's unique key when the job leaves its queue.
local SY_META = 'switchyard.meta'
local SY_RESULT = 'switchyard.result'
local SY_PROGRESS = 'switchyard.progress'
local SY_QUEUE = 'switchyard.queue'

-- The queue a job belongs to. qless blanks the queue field of a completed job, so then it is the
-- queue of the last `put` in its history.
local function home_queue(jid)
  local queue = redis.call('hget', job_key(jid), 'queue')
  if queue == false then
    return nil
  end
  if queue ~= '' then
    return queue
  end
  local imported = redis.call('hget', job_key(jid), SY_QUEUE)
  if imported then
    return imported
  end
  local list = job_key(jid, '-history')
  for i = -1, -redis.call('llen', list), -1 do
    local entry = cjson.decode(redis.call('lindex', list, i))
    if entry[2] == 'put' and type(entry[3]) == 'table' and entry[3].q then
      return entry[3].q
    end
  end
  return ''
end

-- Unique keys: the hash ql:sy:unique:<queue> maps a key to the jid that took it. The key is held
-- while that job is unfinished and in that queue (see unique_holder); the entry of a finished job
-- is replaced by the next enqueue with the key, or removed when the job leaves the queue.
local function unique_hash(queue)
  return 'ql:sy:unique:' .. queue
end

-- Gives up the unique key the job holds in its queue (default: its home queue), because the job
-- is leaving that queue. A job without Switchyard meta (every job qless clients put) holds none,
-- so for those this only reads and qless's own commands write exactly what qless-core writes.
local function release_unique(jid, queue)
  local meta = redis.call('hget', job_key(jid), SY_META)
  local unique = meta and cjson.decode(meta).uniqueKey
  if type(unique) ~= 'string' then
    return
  end
  queue = queue or home_queue(jid)
  if queue and redis.call('hget', unique_hash(queue), unique) == jid then
    redis.call('hdel', unique_hash(queue), unique)
  end
end
