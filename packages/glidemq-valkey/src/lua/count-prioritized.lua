-- Counts the prioritized jobs in `scheduled`: members scored exactly band * 2^42 (band >= 1), the
-- score glide-mq gives a job that waits only for its priority. glide-mq's getJobCounts counts them as
-- delayed; their state is `prioritized`, a waiting job. One ZCOUNT per band present, lowest first.
-- KEYS: scheduled
local count = 0
local cursor = PRIORITY_SHIFT
while true do
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('%.0f', cursor), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then break end
  local band = math.floor((tonumber(first[2]) or 0) / PRIORITY_SHIFT)
  local exact = string.format('%.0f', band * PRIORITY_SHIFT)
  count = count + redis.call('ZCOUNT', KEYS[1], exact, exact)
  cursor = (band + 1) * PRIORITY_SHIFT
end
return count
