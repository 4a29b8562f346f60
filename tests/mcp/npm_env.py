"""Where the npm-installed MCP test dependencies live (installed by ``.ci/mcp-setup.sh``).

``KOVA_MCP_NODE_DIR`` overrides the folder (default ``.ci/.cache/mcp`` in the repository).
Tests that need these packages skip only when Node/npm are missing; otherwise a session
fixture runs the (idempotent) setup script first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / ".ci" / "mcp-setup.sh"
NODE_DIR = Path(os.environ.get("KOVA_MCP_NODE_DIR", ROOT / ".ci" / ".cache" / "mcp"))
MODULES = NODE_DIR / "node_modules"
EVERYTHING = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
CONFORMANCE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PIN_LOOPBACK = Path(__file__).with_name("node") / "pin-loopback.mjs"


def system_node() -> str | None:
    return shutil.which("node")


def _major(node: str) -> int:
    output = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    return int(output.stdout.strip().lstrip("v").split(".")[0])


def node_22() -> str | None:
    """A Node >= 22 binary: the one the setup script installed, else the system's if new
    enough."""
    for candidate in sorted(MODULES.glob("node-linux-*/bin/node")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    node = system_node()
    if node is not None and _major(node) >= 22:
        return node
    return None


def require_npm_packages() -> None:
    """Skip when Node or npm is missing; otherwise make sure the packages are installed."""
    if system_node() is None or shutil.which("npx") is None or shutil.which("npm") is None:
        pytest.skip("node/npx/npm not found: the npm MCP servers cannot run here")
    if not EVERYTHING.exists() or not CONFORMANCE.exists():
        subprocess.run(["bash", str(SETUP)], check=True)
