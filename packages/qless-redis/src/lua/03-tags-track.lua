-- Part 3: tags on jobs and tracking.

local function decode_tag_list(raw)
  local tags = cjson.decode(raw)
  local has = {}
  for _, tag in ipairs(tags) do
    has[tag] = true
  end
  return tags, has
end

function Q.tag_add(now, jid, ...)
  local added = { ... }
  local raw = redis.call('hget', job_key(jid), 'tags')
  if not raw then
    error('Tag(): Job ' .. jid .. ' does not exist')
  end
  local tags, has = decode_tag_list(raw)
  for _, tag in ipairs(added) do
    if not has[tag] then
      has[tag] = true
      tags[#tags + 1] = tag
    end
    -- Counted again even when the job already had the tag, as qless does.
    redis.call('zadd', 'ql:t:' .. tag, now, jid)
    redis.call('zincrby', 'ql:tags', 1, tag)
  end
  redis.call('hset', job_key(jid), 'tags', cjson.encode(tags))
  return tags
end

function Q.tag_remove(now, jid, ...)
  local removed = { ... }
  local raw = redis.call('hget', job_key(jid), 'tags')
  if not raw then
    error('Tag(): Job ' .. jid .. ' does not exist')
  end
  local tags, has = decode_tag_list(raw)
  for _, tag in ipairs(removed) do
    has[tag] = nil
    redis.call('zrem', 'ql:t:' .. tag, jid)
    redis.call('zincrby', 'ql:tags', -1, tag)
  end
  local kept = {}
  for _, tag in ipairs(tags) do
    if has[tag] then
      kept[#kept + 1] = tag
    end
  end
  redis.call('hset', job_key(jid), 'tags', cjson.encode(kept))
  return kept
end

function Q.tag(now, command, ...)
  local args = { ... }
  assert(command, 'Tag(): Arg "command" must be "add", "remove", "get" or "top"')
  if command == 'add' then
    local jid = assert(args[1], 'Tag(): Arg "jid" missing')
    return Q.tag_add(now, jid, unpack(args, 2))
  elseif command == 'remove' then
    local jid = assert(args[1], 'Tag(): Arg "jid" missing')
    return Q.tag_remove(now, jid, unpack(args, 2))
  elseif command == 'get' then
    local tag = assert(args[1], 'Tag(): Arg "tag" missing')
    local offset = assert(tonumber(args[2] or 0), 'Tag(): Arg "offset" not a number: ' .. tostring(args[2]))
    local count = assert(tonumber(args[3] or 25), 'Tag(): Arg "count" not a number: ' .. tostring(args[3]))
    return {
      total = redis.call('zcard', 'ql:t:' .. tag),
      jobs = redis.call('zrange', 'ql:t:' .. tag, offset, offset + count - 1),
    }
  elseif command == 'top' then
    local offset = assert(tonumber(args[1] or 0), 'Tag(): Arg "offset" not a number: ' .. tostring(args[1]))
    local count = assert(tonumber(args[2] or 25), 'Tag(): Arg "count" not a number: ' .. tostring(args[2]))
    -- Only tags used by at least two jobs are "top" tags.
    return redis.call('zrevrangebyscore', 'ql:tags', '+inf', 2, 'limit', offset, count)
  else
    error('Tag(): First argument must be "add", "remove" or "get"')
  end
end

function Q.track(now, command, jid)
  if command ~= nil then
    assert(jid, 'Track(): Arg "jid" missing')
    assert(job_exists(need_jid(jid)), 'Track(): Job does not exist')
    local action = string.lower(command)
    if action == 'track' then
      publish('track', jid)
      return redis.call('zadd', 'ql:tracked', now, jid)
    elseif action == 'untrack' then
      publish('untrack', jid)
      return redis.call('zrem', 'ql:tracked', jid)
    end
    error('Track(): Unknown action "' .. command .. '"')
  end
  local listing = { jobs = {}, expired = {} }
  for _, tracked in ipairs(redis.call('zrange', 'ql:tracked', 0, -1)) do
    local doc = job_document(tracked)
    if doc then
      listing.jobs[#listing.jobs + 1] = doc
    else
      listing.expired[#listing.expired + 1] = tracked
    end
  end
  return listing
end
