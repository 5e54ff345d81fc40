-- Extends a Switchyard lease: lastActive (the native heartbeat a glide-mq worker also writes) and
-- syLeaseUntil; optionally records progress with glide-mq's `progress` event.
-- KEYS: job, sy:leases, events
-- ARGV: jobId, worker ('' = no check), now, leaseUntil ('' = keep), progress ('' = none)
-- Returns {'OK', flatHash} | {'NOT_FOUND'} | {'LEASE_LOST'}
local h = redis.call('HMGET', KEYS[1], 'state', 'syWorker', 'processedOn', 'syLeaseStart')
if not h[1] then return {'NOT_FOUND'} end
if h[1] ~= 'active' or (ARGV[2] ~= '' and (h[2] ~= ARGV[2] or h[3] ~= h[4])) then return {'LEASE_LOST'} end
redis.call('HSET', KEYS[1], 'lastActive', ARGV[3])
if ARGV[4] ~= '' and h[2] then
  redis.call('HSET', KEYS[1], 'syLeaseUntil', ARGV[4])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'progress', ARGV[5])
  redis.call('XADD', KEYS[3], '*', 'event', 'progress', 'jobId', ARGV[1], 'data', ARGV[5])
end
return {'OK', redis.call('HGETALL', KEYS[1])}
