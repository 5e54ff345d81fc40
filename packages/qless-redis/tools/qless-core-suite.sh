#!/usr/bin/env bash
# Runs qless-core's own test suite (test/ of seomoz/qless-core, 243 Python 2 tests) against
# Switchyard's script in place of qless.lua. Not part of `npm test`: qless-core is not in this
# repository. Everything happens in a temporary directory, on a private redis-server.
#
#   packages/qless-redis/tools/qless-core-suite.sh /path/to/qless-core-checkout
#
# Needs python3 (with venv and lib2to3, i.e. Python <= 3.12), redis-server, node + npx (tsx),
# and PyPI for the `redis` package. The suite is ported mechanically with 2to3; its test_asserts
# then fails by construction (2to3 renames the assertRaisesRegexp it tests), with the real script too.
set -euo pipefail
core="${1:?usage: qless-core-suite.sh <qless-core checkout>}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'kill "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$work"' EXIT

cp -r "$core/test" "$core/qless.py" "$work/"
python3 -m lib2to3 -w -n "$work/test" "$work/qless.py" >/dev/null 2>&1
sed -i 's/redis.Redis.from_url(url)/redis.Redis.from_url(url, decode_responses=True)/' "$work/test/common.py"
(cd "$here/../../.." && npx tsx -e 'import("./packages/qless-redis/src/script.ts").then((m) => process.stdout.write(m.qlessScript().source))') > "$work/qless.lua"
python3 -m venv "$work/venv" && "$work/venv/bin/pip" install --quiet redis
redis-server --port 0 --unixsocket "$work/redis.sock" --save '' --appendonly no --dir "$work" \
  --daemonize yes --pidfile "$work/redis.pid"
for _ in $(seq 50); do [ -S "$work/redis.sock" ] && break; sleep 0.1; done
cd "$work"
REDIS_URL="unix://$work/redis.sock" PYTHONPATH="$work:$work/test" \
  "$work/venv/bin/python" -m unittest discover -s test -p 'test_*.py' 2>&1 | tail -n 25
