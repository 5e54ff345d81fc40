"""Schemathesis hooks for test/fuzz-openapi.test.ts (loaded through SCHEMATHESIS_HOOKS).

A reserve may wait for a job up to its documented maximum (30 s), and glide-mq's add-and-wait for
the job to finish (30 s by default, up to 300 s). On the fuzzer's queues, where no worker runs,
every such request would park that long, so the waits are cut to a few milliseconds before the
request is sent: the routes are still exercised, and the run stays within minutes.
"""

import schemathesis

LONG_POLL_FIELDS = ("wait", "waitMs")
MAX_WAIT_MS = 20


def cut(options, field):
    value = options.get(field)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_WAIT_MS:
        options[field] = MAX_WAIT_MS


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if not isinstance(case.body, dict):
        return
    for field in LONG_POLL_FIELDS:
        cut(case.body, field)
    if case.path.endswith("/jobs/wait"):
        options = case.body.setdefault("opts", {})
        if isinstance(options, dict):
            options.setdefault("waitTimeout", MAX_WAIT_MS)
            cut(options, "waitTimeout")
