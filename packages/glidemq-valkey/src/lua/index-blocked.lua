-- Keeps sy:blocked, Switchyard's index of jobs waiting on their children, true to the job hashes:
-- a parent glide-mq's FlowProducer wrote (indexed nowhere) joins it, scored by its timestamp; a member
-- whose children are done (released by a glide-mq worker, which knows no sy:blocked) or that is gone
-- leaves it.
-- KEYS: sy:blocked
-- ARGV: ids of jobs that have a deps:<id> set (found by a SCAN)
-- Returns the number of jobs blocked.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'sy:blocked')
for _, id in ipairs(ARGV) do
  local h = redis.call('HMGET', prefix .. 'job:' .. id, 'state', 'timestamp')
  if h[1] == 'waiting-children' then redis.call('ZADD', KEYS[1], 'NX', tonumber(h[2]) or 0, id) end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('HGET', prefix .. 'job:' .. id, 'state') ~= 'waiting-children' then redis.call('ZREM', KEYS[1], id) end
end
return redis.call('ZCARD', KEYS[1])
