-- Removes jobs outright, as glidemq_removeJob does, unless a worker holds them: the job hash and its
-- log, dependency sets and streams, its place in scheduled/completed/failed, the priority and lifo
-- lists and Switchyard's indexes, and a `removed` event. As with glide-mq, a waiting job's stream entry
-- stays: a worker that reads it finds no hash and acknowledges it.
-- KEYS: events, scheduled, completed, failed, priority, lifo, sy:leases, sy:blocked
-- ARGV: job ids
-- Returns the ids removed.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'events')
local removed = {}
for _, id in ipairs(ARGV) do
  local state = redis.call('HGET', prefix .. 'job:' .. id, 'state')
  if state and state ~= 'active' then
    for i = 2, 4 do redis.call('ZREM', KEYS[i], id) end
    for i = 5, 6 do redis.call('LREM', KEYS[i], 0, id) end
    redis.call('ZREM', KEYS[7], id)
    redis.call('ZREM', KEYS[8], id)
    redis.call('UNLINK', prefix .. 'job:' .. id, prefix .. 'log:' .. id, prefix .. 'deps:' .. id, prefix .. 'parents:' .. id,
      prefix .. 'jstream:' .. id, prefix .. 'signals:' .. id)
    emitEvent(KEYS[1], 'removed', id, nil)
    removed[#removed + 1] = id
  end
end
return removed
