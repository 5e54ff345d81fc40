-- Records the instances of a recurring job added (core's advanceRecurrence): count and nextAt move
-- only while the stored count is still the one the caller saw, so of two callers adding the same
-- instances one advances it and the other is told no. Only the definition's hash: on a cluster its
-- queue's index is in another slot, which the caller updates after.
-- KEYS: <prefix>:sy:recurring:{<id>}
-- ARGV: the count seen, the new count, the new nextAt (JS number text, stored as given)
-- Returns the recurrence's queue when it advanced; false (nil) when it is gone or its count moved on.
local stored = redis.call('HMGET', KEYS[1], 'count', 'queue')
if not stored[1] or tonumber(stored[1]) ~= tonumber(ARGV[1]) then return false end
redis.call('HSET', KEYS[1], 'count', ARGV[2], 'nextAt', ARGV[3])
return stored[2]
