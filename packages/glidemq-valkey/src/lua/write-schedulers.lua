-- Writes job schedulers (and adds the jobs the due ones fire) unless glide-mq's scheduler holds its
-- mutation lock (its tick or an upsert in progress), and only if every entry is still what the caller
-- read: all of the writes or none of them.
-- KEYS: schedulers, schedulers:lock:__tick__, id, events
-- ARGV: 21 per scheduler: name, present ('1'/'0'), the entry as read, the new entry ('' removes it),
--       fire ('1'/'0'), then the 16 add.lua arguments of the job it adds (ignored unless fire is '1')
-- Returns how many jobs were added, or 'busy' / 'changed' (nothing written: read again).
if redis.call('EXISTS', KEYS[2]) == 1 then return 'busy' end
local PER = 21
for offset = 0, #ARGV - 1, PER do
  local current = redis.call('HGET', KEYS[1], ARGV[offset + 1])
  if ARGV[offset + 2] == '1' then
    if current ~= ARGV[offset + 3] then return 'changed' end
  elseif current then
    return 'changed'
  end
end
local prefix = string.sub(KEYS[3], 1, #KEYS[3] - 2)
local added = 0
for offset = 0, #ARGV - 1, PER do
  if ARGV[offset + 5] == '1' then
    local a = {}
    for i = 1, 16 do a[i] = ARGV[offset + 5 + i] end
    createJob(prefix, KEYS[3], a)
    added = added + 1
  end
  if ARGV[offset + 4] == '' then
    redis.call('HDEL', KEYS[1], ARGV[offset + 1])
  else
    redis.call('HSET', KEYS[1], ARGV[offset + 1], ARGV[offset + 4])
  end
end
return added
