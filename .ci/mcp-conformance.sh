#!/usr/bin/env bash
# Runs the official MCP client conformance suite, @modelcontextprotocol/conformance (the
# `core` suite unless another is named), against kova's conformance client command
# (tests/mcp/conformance_client.py, built on kova.mcp.McpClient).
#
# The suite's scenario servers listen on port 0 without a host, i.e. on every interface, so
# the runner runs in a private network namespace with only loopback up (needs root and
# `unshare`; without them it refuses rather than expose the servers).
#
#   .ci/mcp-conformance.sh            # the core suite
#   .ci/mcp-conformance.sh auth       # another suite
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SUITE="${1:-core}"

bash .ci/mcp-setup.sh
DIR="${KOVA_MCP_NODE_DIR:-.ci/.cache/mcp}"
[[ "$DIR" = /* ]] || DIR="$ROOT/$DIR"
NODE="$(ls "$DIR"/node_modules/node-linux-*/bin/node 2>/dev/null | head -n 1 || true)"
if [[ -z "$NODE" ]]; then
  NODE="$(command -v node)"
fi
if [[ "$("$NODE" --version | sed -E 's/^v([0-9]+).*/\1/')" -lt 22 ]]; then
  echo "mcp-conformance: the runner needs Node >= 22 (run .ci/mcp-setup.sh)" >&2
  exit 1
fi
RUNNER="$DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
COMMAND="$ROOT/.venv/bin/python $ROOT/tests/mcp/conformance_client.py"

if [[ "$(id -u)" != 0 ]] || ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
  echo "mcp-conformance: needs root, unshare and ip for a loopback-only network namespace" >&2
  exit 1
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cd "$OUT"
run() {
  unshare -n sh -c 'ip link set lo up && exec "$@"' conformance \
    "$NODE" "$RUNNER" client --command "$COMMAND" "$@"
}

# The suite runs its scenarios in parallel; two of them (sse-retry's reconnect timing, and
# auth/scope-step-up's 30 s budget) can miss their clock on a machine busy with other work.
# A scenario that fails in the parallel run is run again once on its own, and only a failure
# there fails the check: a real conformance failure fails both times.
if run --suite "$SUITE" -o "$OUT/results" | tee "$OUT/suite.log"; then
  exit 0
fi
failed="$(sed -n 's/^✗ \([^:]*\):.*/\1/p' "$OUT/suite.log")"
if [[ -z "$failed" ]]; then
  echo "mcp-conformance: the suite failed without naming a failed scenario" >&2
  exit 1
fi
status=0
for scenario in $failed; do
  echo "mcp-conformance: running $scenario again on its own"
  if ! run --scenario "$scenario" -o "$OUT/rerun"; then
    status=1
  fi
done
exit "$status"
