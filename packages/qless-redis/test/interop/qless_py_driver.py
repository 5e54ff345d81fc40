"""Drives the real qless-py client (PyPI qless-py 0.11.4) for Switchyard's interop tests.

usage: python qless_py_driver.py <redis-url> <script> < ops.json > results.json
  <script> is `bundled` (qless-py's own qless-core, with the one-line Redis 7 fix applied in
  memory: its `table.extend` writes the read-only global `table`) or a path to a qless.lua to
  load in its place (Switchyard's assembled script).
ops.json is a list of {"op": ..., ...}; the answer is the list of results, in order.
"""
import json
import pkgutil
import sys

import qless

URL, SCRIPT = sys.argv[1], sys.argv[2]
_clients = {}


def script_text():
    if SCRIPT == 'bundled':
        text = pkgutil.get_data('qless', 'qless-core/qless.lua').decode('utf-8')
        return text.replace('function table.extend(self, other)', 'local function table_extend(self, other)') \
                   .replace('table.extend(', 'table_extend(')
    with open(SCRIPT) as handle:
        return handle.read()


def client(worker):
    """One qless-py client per worker name (qless-py names its worker after the host)."""
    if worker not in _clients:
        made = qless.Client(URL, hostname=worker)
        made._lua = made.redis.register_script(script_text())
        _clients[worker] = made
    return _clients[worker]


def summary(job):
    if job is None:
        return None
    return {
        'jid': job.jid, 'klass': job.klass_name, 'queue': job.queue_name, 'state': job.state,
        'data': job.data, 'priority': job.priority, 'tags': job.tags, 'worker': job.worker_name,
        'retries': job.original_retries, 'remaining': job.retries_left, 'expires': job.expires_at,
        'failure': job.failure, 'dependencies': job.dependencies, 'dependents': job.dependents,
        'history': [entry['what'] for entry in job.history],
    }


def run(op):
    kind = op['op']
    c = client(op.get('worker', 'py-client'))
    if kind == 'put':
        return c.queues[op['queue']].put(op['klass'], op['data'], jid=op.get('jid'), priority=op.get('priority', 0),
                                         tags=op.get('tags', []), delay=op.get('delay', 0),
                                         retries=op.get('retries', 5), depends=op.get('depends', []))
    if kind == 'pop':
        return summary(c.queues[op['queue']].pop())
    if kind == 'peek':
        return summary(c.queues[op['queue']].peek())
    if kind == 'get':
        return summary(c.jobs[op['jid']])
    if kind == 'heartbeat':
        return c.jobs[op['jid']].heartbeat()
    if kind == 'complete':
        return c.jobs[op['jid']].complete(op.get('next'))
    if kind == 'fail':
        return c.jobs[op['jid']].fail(op['group'], op['message'])
    if kind == 'retry':
        return c.jobs[op['jid']].retry(op.get('delay', 0))
    if kind == 'tag':
        return c.jobs[op['jid']].tag(*op['tags'])
    if kind == 'track':
        return c.jobs[op['jid']].track()
    if kind == 'tracked':
        return [job.jid for job in c.jobs.tracked()['jobs']]
    if kind == 'tagged':
        return c.jobs.tagged(op['tag'])['jobs']
    if kind == 'counts':
        return c.queues[op['queue']].counts
    if kind == 'failed':
        return c.jobs.failed(op['group'])['jobs'] if 'group' in op else c.jobs.failed()
    if kind == 'unfail':
        return c.unfail(op['group'], op['queue'])
    if kind == 'recur':
        return c.queues[op['queue']].recur(op['klass'], op['data'], op['interval'], jid=op.get('jid'))
    if kind == 'recurring':
        job = c.jobs[op['jid']]
        # `next` is qless-py's own read of the queue's -recur sorted set (ZSCORE), outside the script.
        return {'jid': job.jid, 'klass': job.klass_name, 'queue': job.queue_name, 'interval': job.interval,
                'count': job.count, 'data': job.data, 'next': job.next}
    if kind == 'unrecur':
        return c.jobs[op['jid']].cancel()
    if kind == 'workers':
        return c.workers.counts
    if kind == 'length':
        return len(c.queues[op['queue']])
    raise ValueError('unknown op %s' % kind)


results = []
for op in json.load(sys.stdin):
    try:
        results.append({'ok': run(op)})
    except Exception as exc:  # the tests assert on errors too
        results.append({'error': '%s: %s' % (type(exc).__name__, exc)})
json.dump(results, sys.stdout)
