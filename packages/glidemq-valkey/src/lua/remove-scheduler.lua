-- Removes a job scheduler, as Queue.removeJobScheduler does, unless glide-mq's scheduler holds its
-- mutation lock (a tick or an upsert in progress): then 'busy', and the caller tries again.
-- KEYS: schedulers, schedulers:lock:__tick__
-- ARGV: name
-- Returns 1 (removed), 0 (no such scheduler) or 'busy'.
if redis.call('EXISTS', KEYS[2]) == 1 then return 'busy' end
return redis.call('HDEL', KEYS[1], ARGV[1])
