-- Part 9: recurring jobs, kept in ql:r:<jid> and spawned by pop/peek as <jid>-<count>.

local function recurring_key(jid)
  return 'ql:r:' .. jid
end

function Q.recur(now, queue, jid, klass, raw_data, spec, ...)
  local args = { ... }
  assert(jid, 'RecurringJob On(): Arg "jid" missing')
  assert(klass, 'RecurringJob On(): Arg "klass" missing')
  assert(spec, 'RecurringJob On(): Arg "spec" missing')
  assert(cjson.decode(raw_data), 'RecurringJob On(): Arg "data" not JSON: ' .. tostring(raw_data))
  if spec ~= 'interval' then
    error('Recur(): schedule type "' .. tostring(spec) .. '" unknown')
  end

  local interval = assert(tonumber(args[1]), 'Recur(): Arg "interval" not a number: ' .. tostring(args[1]))
  local offset = assert(tonumber(args[2]), 'Recur(): Arg "offset" not a number: ' .. tostring(args[2]))
  if interval <= 0 then
    error('Recur(): Arg "interval" must be greater than 0')
  end
  if #args % 2 == 1 then
    error('Odd number of additional args: ' .. tostring(args))
  end
  local options = pairs_to_options(args, 3)
  local tags = assert(cjson.decode(options.tags or '{}'),
    'Recur(): Arg "tags" must be JSON string array: ' .. tostring(options.tags))
  local priority = assert(tonumber(options.priority or 0),
    'Recur(): Arg "priority" not a number: ' .. tostring(options.priority))
  local retries = assert(tonumber(options.retries or 0),
    'Recur(): Arg "retries" not a number: ' .. tostring(options.retries))
  local backlog = assert(tonumber(options.backlog or 0),
    'Recur(): Arg "backlog" not a number: ' .. tostring(options.backlog))

  -- Re-recurring keeps the spawn count and leaves the previous queue.
  local count, old_queue = unpack(redis.call('hmget', recurring_key(jid), 'count', 'queue'))
  count = count or 0
  if old_queue then
    set_remove(old_queue, 'recur', jid)
  end
  redis.call('hmset', recurring_key(jid),
    'jid', jid,
    'klass', klass,
    'data', raw_data,
    'priority', priority,
    'tags', cjson.encode(tags or {}),
    'state', 'recur',
    'queue', queue,
    'type', 'interval',
    'count', count,
    'interval', interval,
    'retries', retries,
    'backlog', backlog)
  set_add(queue, 'recur', now + offset, jid)
  register_queue(queue, now)
  return jid
end

function Q.recurring_document(jid)
  local f = redis.call('hmget', recurring_key(jid), 'jid', 'klass', 'state', 'queue',
    'priority', 'interval', 'retries', 'count', 'data', 'tags', 'backlog')
  if not f[1] then
    return nil
  end
  return {
    jid = f[1],
    klass = f[2],
    state = f[3],
    queue = f[4],
    priority = tonumber(f[5]),
    interval = tonumber(f[6]),
    retries = tonumber(f[7]),
    count = tonumber(f[8]),
    data = f[9],
    tags = cjson.decode(f[10]),
    backlog = tonumber(f[11] or 0),
  }
end

function Q.recur_update(now, jid, ...)
  local args = { ... }
  local key = recurring_key(jid)
  if redis.call('exists', key) == 0 then
    error('Recur(): No recurring job ' .. jid)
  end
  for i = 1, #args, 2 do
    local option, value = args[i], args[i + 1]
    assert(value, 'No value provided for ' .. tostring(option))
    if option == 'priority' or option == 'interval' or option == 'retries' then
      value = assert(tonumber(value), 'Recur(): Arg "' .. option .. '" must be a number: ' .. tostring(value))
      if option == 'interval' then
        -- The next spawn moves by the change in interval.
        local queue, interval = unpack(redis.call('hmget', key, 'queue', 'interval'))
        redis.call('zincrby', queue_key(queue, 'recur'), value - tonumber(interval), jid)
      end
      redis.call('hset', key, option, value)
    elseif option == 'data' then
      assert(cjson.decode(value), 'Recur(): Arg "data" is not JSON-encoded: ' .. tostring(value))
      redis.call('hset', key, 'data', value)
    elseif option == 'klass' then
      redis.call('hset', key, 'klass', value)
    elseif option == 'queue' then
      local old_queue = redis.call('hget', key, 'queue')
      local score = redis.call('zscore', queue_key(old_queue, 'recur'), jid)
      set_remove(old_queue, 'recur', jid)
      set_add(value, 'recur', score, jid)
      redis.call('hset', key, 'queue', value)
      register_queue(value, now)
    elseif option == 'backlog' then
      value = assert(tonumber(value), 'Recur(): Arg "backlog" not a number: ' .. tostring(value))
      redis.call('hset', key, 'backlog', value)
    else
      error('Recur(): Unrecognized option "' .. option .. '"')
    end
  end
  return true
end

-- recur.tag / recur.untag answer the JSON text of the new tag list.
function Q.recur_tag(jid, ...)
  local added = { ... }
  local raw = redis.call('hget', recurring_key(jid), 'tags')
  if not raw then
    error('Tag(): Job ' .. jid .. ' does not exist')
  end
  local tags, has = decode_tag_list(raw)
  for _, tag in ipairs(added) do
    if not has[tag] then
      tags[#tags + 1] = tag
    end
  end
  local encoded = cjson.encode(tags)
  redis.call('hset', recurring_key(jid), 'tags', encoded)
  return encoded
end

function Q.recur_untag(jid, ...)
  local removed = { ... }
  local raw = redis.call('hget', recurring_key(jid), 'tags')
  if not raw then
    error('Untag(): Job ' .. jid .. ' does not exist')
  end
  local tags, has = decode_tag_list(raw)
  for _, tag in ipairs(removed) do
    has[tag] = nil
  end
  local kept = {}
  for _, tag in ipairs(tags) do
    if has[tag] then
      kept[#kept + 1] = tag
    end
  end
  local encoded = cjson.encode(kept)
  redis.call('hset', recurring_key(jid), 'tags', encoded)
  return encoded
end

function Q.unrecur(jid)
  local queue = redis.call('hget', recurring_key(jid), 'queue')
  if queue then
    set_remove(queue, 'recur', jid)
    redis.call('del', recurring_key(jid))
  end
  return true
end
