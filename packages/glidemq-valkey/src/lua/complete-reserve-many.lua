-- Completes several active jobs of one queue, each for the worker that holds it, and reserves each
-- worker's next jobs under a lease, in one call: the Backend's complete and completeAndReserve when
-- calls for one queue arrive together. Each job ends exactly as complete.lua leaves it; the next jobs
-- are taken as reserve.lua takes them (lib/reserve.lua), for all the workers at once, and dealt out
-- in the order of the calls. Stream entries are read under the first asking worker's consumer name.
-- KEYS: stream, meta (every other key is the queue's, under the same hash tag)
-- ARGV: now, group, then per call: jobId, returnvalue, leaseWorker ('' = no lease check), consumer,
--       reserveWorker, reserveCount (0 = reserve nothing), reserveLeaseUntil, heldRun (the processedOn
--       of the run whose hash the caller holds from its reserve, '' = none)
-- Returns one reply per call: {'OK', hashBefore, dependencyMembers, {{jobId, entryId, flatHash}, ...},
-- finishedOn} or complete.lua's refusal ({'NOT_FOUND'} | {'INVALID_STATE', state} | {'LEASE_LOST'}).
-- hashBefore is the job's hash as read before completion, empty when the job was still in the run
-- the caller holds: the caller applies what completion wrote (state, returnvalue, finishedOn; the sy
-- lease fields deleted when syWorker was set) rather than Lua building a second copy of every hash.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 6)
local now = tonumber(ARGV[1])
local group = ARGV[2]
local batch = newCompletions(prefix, group, now)
local replies, claims, claimants = {}, {}, {}
for offset = 3, #ARGV, 8 do
  local done = completeJob(batch, ARGV[offset], '-', ARGV[offset + 1], ARGV[offset + 2], true, ARGV[offset + 7])
  if done[1] ~= 'OK' then
    replies[#replies + 1] = done
  else
    replies[#replies + 1] = {'OK', done[2], done[3], {}, batch.nowStr}
    local count = tonumber(ARGV[offset + 5]) or 0
    if count > 0 then
      claims[#claims + 1] = {worker = ARGV[offset + 4], leaseUntil = ARGV[offset + 6], count = count}
      claimants[#claimants + 1] = {reply = #replies, consumer = ARGV[offset + 3]}
    end
  end
end
flushCompletions(batch)
-- The next jobs, for every worker that asked, in one reserve: the queue's checks and the stream read
-- happen once per call, not once per job.
if #claims > 0 then
  local dealt = reserveForEach(prefix, now, group, claimants[1].consumer, claims, true, true)
  for i, claimant in ipairs(claimants) do replies[claimant.reply][4] = dealt[i] end
end
return replies
