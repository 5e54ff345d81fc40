-- Removes the waiting jobs, as glidemq_drain does: stream entries no worker holds, the lifo and
-- priority lists, and with `delayed` everything in `scheduled` (prioritized jobs included).
-- KEYS: stream, scheduled, events, id, lifo, priority
-- ARGV: delayed (1/0), group
-- Returns how many were removed.
local streamKey, scheduledKey = KEYS[1], KEYS[2]
local prefix = string.sub(KEYS[4], 1, #KEYS[4] - 2)
local removed = 0
local function unlinkJob(id)
  redis.call('UNLINK', prefix .. 'job:' .. id, prefix .. 'log:' .. id, prefix .. 'deps:' .. id, prefix .. 'jstream:' .. id,
    prefix .. 'signals:' .. id)
  removed = removed + 1
end
local held = {}
local ok, pending = pcall(redis.call, 'XPENDING', streamKey, ARGV[2], '-', '+', 1000000)
if ok then for _, entry in ipairs(pending) do held[entry[1]] = true end end
local cursor = '-'
while true do
  local entries = redis.call('XRANGE', streamKey, cursor, '+', 'COUNT', 1000)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    if not held[entry[1]] then
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'jobId' and fields[f + 1] ~= '' then unlinkJob(fields[f + 1]) break end
      end
      redis.call('XDEL', streamKey, entry[1])
    end
  end
  cursor = '(' .. entries[#entries][1]
end
if ARGV[1] == '1' then
  for _, id in ipairs(redis.call('ZRANGE', scheduledKey, 0, -1)) do unlinkJob(id) end
  redis.call('UNLINK', scheduledKey)
end
for _, listKey in ipairs({KEYS[5], KEYS[6]}) do
  for _, id in ipairs(redis.call('LRANGE', listKey, 0, -1)) do unlinkJob(id) end
  redis.call('UNLINK', listKey)
end
if removed > 0 then emitEvent(KEYS[3], 'drained', tostring(removed), nil) end
return removed
