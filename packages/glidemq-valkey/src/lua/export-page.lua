-- One export page in one call (listing.ts exportJobs): SCAN of the queue's job hashes from a cursor
-- until `limit` jobs are read or the keyspace ends, each read as load-jobs reads it. A SCAN batch
-- only partly taken is started again by the next page, which skips the ids of it already exported.
-- Done here, a page is one round trip where SCAN and the reads were several, each waiting behind
-- whatever else the server runs (a migration's import into the same server).
-- KEYS: scheduled. ARGV: cursor, MATCH pattern, COUNT, limit, '1' when the cursor is a resumed one
-- (else the first page, which scans from '0' at least once), then the ids to skip.
-- Answers {cursor, ids of its batch exported so far (non-empty when that batch was only partly taken),
-- ids read, {readJob result per id}}.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'scheduled')
local jobPrefix = prefix .. 'job:'
local cursor, pattern, count, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local started = ARGV[5] == '1'
local exported, skip = {}, {}
for i = 6, #ARGV do
  exported[#exported + 1] = ARGV[i]
  skip[ARGV[i]] = true
end
local ids, results, seen = {}, {}, {}
while #ids < limit and not (started and cursor == '0' and #exported == 0) do
  started = true
  local reply = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', count)
  local fresh = {}
  for _, key in ipairs(reply[2]) do
    local id = string.sub(key, #jobPrefix + 1)
    -- job:<id> only: glide-mq ids have no colon, so a longer key is not a job hash.
    if id ~= '' and not string.find(id, ':', 1, true) and not skip[id] and not seen[id] then
      fresh[#fresh + 1] = id
    end
  end
  local taken = math.min(limit - #ids, #fresh)
  for i = 1, taken do
    local id = fresh[i]
    seen[id] = true
    ids[#ids + 1] = id
    results[#results + 1] = readJob(prefix, KEYS[1], id)
  end
  if taken < #fresh then
    for i = 1, taken do exported[#exported + 1] = fresh[i] end
  else
    cursor, exported, skip = reply[1], {}, {}
  end
end
return {cursor, exported, ids, results}
