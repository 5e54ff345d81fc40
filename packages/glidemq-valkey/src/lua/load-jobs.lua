-- Reads jobs of one queue (get, getMany, list, export) in one call: for each id readJob's
-- {flat hash, `scheduled` score of a delayed job or false, deps members}. One reply per page, not
-- three commands per job.
-- KEYS: scheduled. ARGV: job ids.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'scheduled')
local results = {}
for i = 1, #ARGV do
  results[i] = readJob(prefix, KEYS[1], ARGV[i])
end
return results
