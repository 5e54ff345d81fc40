-- Removes finished jobs older than a cutoff, as glidemq_clean does.
-- KEYS: completed or failed, events, id
-- ARGV: cutoff (finishedOn at or before it), limit
-- Returns the removed ids.
local limit = tonumber(ARGV[2])
if not limit or limit <= 0 then return {} end
local prefix = string.sub(KEYS[3], 1, #KEYS[3] - 2)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', tonumber(ARGV[1])), 'LIMIT', 0, limit)
if #ids == 0 then return {} end
for _, id in ipairs(ids) do
  redis.call('UNLINK', prefix .. 'job:' .. id, prefix .. 'log:' .. id, prefix .. 'deps:' .. id, prefix .. 'parents:' .. id,
    prefix .. 'jstream:' .. id, prefix .. 'signals:' .. id)
end
for i = 1, #ids, 1000 do redis.call('ZREM', KEYS[1], unpack(ids, i, math.min(i + 999, #ids))) end
emitEvent(KEYS[2], 'cleaned', tostring(#ids), nil)
return ids
