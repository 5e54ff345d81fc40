-- Resumes a suspended job with a signal, as glidemq_signal: the signal appended to signals:<id> and
-- mirrored (all of them, as a JSON array) in the hash's `signals` field, the job waiting again on the
-- stream, a `resumed` event naming the signal.
-- KEYS: job, stream, events, suspended, signals:<id>
-- ARGV: jobId, signal name, signal data (JSON text, '' for none), now
-- Returns 'ok', or 'not_suspended' (a missing job included) with nothing written.
local jobKey, streamKey, eventsKey, suspendedKey, signalsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local jobId = ARGV[1]
if redis.call('HGET', jobKey, 'state') ~= 'suspended' then return 'not_suspended' end

local now = tonumber(ARGV[4])
redis.call('RPUSH', signalsKey, cjson.encode({name = ARGV[2], data = ARGV[3], receivedAt = now}))
local all = {}
for i, text in ipairs(redis.call('LRANGE', signalsKey, 0, -1)) do all[i] = cjson.decode(text) end
redis.call('HSET', jobKey, 'signals', cjson.encode(all), 'state', 'waiting')
redis.call('ZREM', suspendedKey, jobId)
redis.call('XADD', streamKey, '*', 'jobId', jobId, 'name', redis.call('HGET', jobKey, 'name') or '')
emitEvent(eventsKey, 'resumed', jobId, {'signal', ARGV[2]})
return 'ok'
