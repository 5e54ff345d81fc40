-- Promotes due delayed, prioritized and retrying jobs, as glidemq_promote does.
-- KEYS: scheduled, stream, events, priority, lifo
-- ARGV: now
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 9)
return promoteDue(prefix, tonumber(ARGV[1]), 1000)
