-- Gives failed jobs another go, as glidemq_retryJobs does: each becomes delayed, due now, in its band,
-- with no attempts made, for the next promotion to release.
-- KEYS: failed, scheduled, events, id
-- ARGV: count (0: all), now
-- Returns how many were retried.
local count, now = tonumber(ARGV[1]) or 0, tonumber(ARGV[2])
local prefix = string.sub(KEYS[4], 1, #KEYS[4] - 2)
local retried = 0
while count == 0 or retried < count do
  local size = count == 0 and 1000 or math.min(1000, count - retried)
  local ids = redis.call('ZRANGE', KEYS[1], 0, size - 1)
  if #ids == 0 then break end
  redis.call('ZREM', KEYS[1], unpack(ids))
  for _, id in ipairs(ids) do
    local jobKey = prefix .. 'job:' .. id
    if redis.call('EXISTS', jobKey) == 1 then
      local band = tonumber(redis.call('HGET', jobKey, 'priority')) or 0
      redis.call('ZADD', KEYS[2], string.format('%.0f', band * PRIORITY_SHIFT + now), id)
      redis.call('HSET', jobKey, 'state', 'delayed', 'attemptsMade', '0', 'failedReason', '', 'finishedOn', '')
      redis.call('HDEL', jobKey, 'revoked', 'stalledCount', 'syErrorGroup')
      retried = retried + 1
    end
  end
end
if retried > 0 then emitEvent(KEYS[3], 'retried', tostring(retried), nil) end
return retried
