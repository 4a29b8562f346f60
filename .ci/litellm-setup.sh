#!/usr/bin/env bash
# Installs the LiteLLM proxy that tests/serve/test_litellm_proxy.py points at kova serve, in
# a virtual environment of its own:
#
#   .ci/.cache/litellm/bin/litellm      the proxy (litellm[proxy], pinned)
#
# Not in kova's dev extra: litellm[proxy] pins older websockets and cryptography than kova's
# other dev dependencies use (it would downgrade them for every test) and brings ~60 packages
# of its own; the proxy is a separate program, so it gets its own environment, as the npm MCP
# servers get theirs (.ci/mcp-setup.sh). .ci/run runs this; override the folder with
# KOVA_LITELLM_DIR.
# Idempotent and fast when already installed: a stamp file records the installed version.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR="${KOVA_LITELLM_DIR:-.ci/.cache/litellm}"
WANTED="litellm[proxy]==1.108.7"
STAMP="$DIR/.kova-installed"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANTED" ]]; then
  exit 0
fi

echo "litellm-setup: installing ${WANTED} into ${DIR}" >&2
python3 -m venv "$DIR"
"$DIR/bin/python" -m pip install --disable-pip-version-check -q "$WANTED"
echo "$WANTED" > "$STAMP"
