-- Queue pause/resume as glidemq_pause/glidemq_resume: meta.paused and a queue event (jobId "0").
-- KEYS: meta, events
-- ARGV: '1' (pause) | '0' (resume)
redis.call('HSET', KEYS[1], 'paused', ARGV[1])
emitEvent(KEYS[2], ARGV[1] == '1' and 'paused' or 'resumed', '0', nil)
return 1
