-- Last part: the command table and the entry point. Replies are shaped as qless shapes them:
-- JSON text for documents, bare values for jid/state/count answers.

API['get'] = function(now, jid)
  local doc = job_document(need_jid(jid))
  if not doc then
    return nil
  end
  return cjson.encode(doc)
end

API['multiget'] = function(now, ...)
  return cjson.encode(job_documents({ ... }))
end

API['put'] = function(now, worker, queue, ...)
  return Q.put(now, worker, need_queue(queue), ...)
end

API['requeue'] = function(now, worker, queue, jid, ...)
  assert(job_exists(need_jid(jid)), 'Requeue(): Job ' .. jid .. ' does not exist')
  return API['put'](now, worker, queue, jid, ...)
end

API['pop'] = function(now, queue, worker, count)
  return cjson.encode(job_documents(Q.pop(now, need_queue(queue), worker, count)))
end

API['peek'] = function(now, queue, count)
  return cjson.encode(job_documents(Q.peek(now, need_queue(queue), count)))
end

API['complete'] = function(now, jid, ...)
  return Q.complete(now, need_jid(jid), ...)
end

API['fail'] = function(now, jid, ...)
  return Q.fail(now, need_jid(jid), ...)
end

API['retry'] = function(now, jid, ...)
  return Q.retry(now, need_jid(jid), ...)
end

API['heartbeat'] = function(now, jid, worker, data)
  return Q.heartbeat(now, need_jid(jid), worker, data)
end

API['priority'] = function(now, jid, priority)
  return Q.priority(need_jid(jid), priority)
end

API['depends'] = function(now, jid, ...)
  return Q.depends(now, need_jid(jid), ...)
end

API['timeout'] = function(now, ...)
  for _, jid in ipairs({ ... }) do
    Q.timeout(now, need_jid(jid))
  end
end

API['cancel'] = function(now, ...)
  return Q.cancel({ ... })
end

API['log'] = function(now, ...)
  return Q.log(now, ...)
end

API['tag'] = function(now, ...)
  return cjson.encode(Q.tag(now, ...))
end

API['track'] = function(now, command, jid)
  return cjson.encode(Q.track(now, command, jid))
end

API['jobs'] = function(now, ...)
  return Q.jobs(now, ...)
end

API['failed'] = function(now, group, start, limit)
  return cjson.encode(Q.failed(group, start, limit))
end

API['unfail'] = function(now, queue, group, count)
  return Q.unfail(now, need_queue(queue), group, count)
end

API['queues'] = function(now, queue)
  return cjson.encode(Q.queue_counts(now, queue))
end

API['workers'] = function(now, worker)
  return cjson.encode(Q.workers(now, worker))
end

API['stats'] = function(now, queue, date)
  return cjson.encode(Q.stats(need_queue(queue), date))
end

API['length'] = function(now, queue)
  return Q.length(need_queue(queue))
end

API['pause'] = function(now, ...)
  redis.call('sadd', 'ql:paused_queues', ...)
end

API['unpause'] = function(now, ...)
  redis.call('srem', 'ql:paused_queues', ...)
end

API['queue.forget'] = function(now, ...)
  redis.call('zrem', 'ql:queues', ...)
end

API['worker.deregister'] = function(now, ...)
  redis.call('zrem', 'ql:workers', ...)
end

API['config.get'] = function(now, option)
  if not option then
    return cjson.encode(config_all())
  end
  return config_get(option)
end

API['config.set'] = function(now, option, value)
  return config_set(option, value)
end

API['config.unset'] = function(now, option)
  return config_unset(option)
end

API['recur'] = function(now, queue, ...)
  return Q.recur(now, need_queue(queue), ...)
end

API['recur.get'] = function(now, jid)
  local doc = Q.recurring_document(need_recurring_jid(jid))
  if not doc then
    return nil
  end
  return cjson.encode(doc)
end

API['recur.update'] = function(now, jid, ...)
  return Q.recur_update(now, need_recurring_jid(jid), ...)
end

API['recur.tag'] = function(now, jid, ...)
  return Q.recur_tag(need_recurring_jid(jid), ...)
end

API['recur.untag'] = function(now, jid, ...)
  return Q.recur_untag(need_recurring_jid(jid), ...)
end

API['unrecur'] = function(now, jid)
  return Q.unrecur(need_recurring_jid(jid))
end

-- Runs one command: <command> <now> <args...>; every key is named in the command itself.
local function dispatch(keys, argv)
  if #keys > 0 then
    error('No Keys should be provided')
  end
  local command_name = assert(table.remove(argv, 1), 'Must provide a command')
  local command = assert(API[command_name], 'Unknown command ' .. command_name)
  local now = tonumber(table.remove(argv, 1))
  now = assert(now, 'Arg "now" missing or not a number: ' .. (now or 'nil'))
  return command(now, unpack(argv))
end

-- Entry point: EVALSHA <sha> 0 <command> <now> <args...>, as qless.lua is called. The function
-- library made of this script (library.ts) registers `dispatch` in place of this line.
return dispatch(KEYS, ARGV)
