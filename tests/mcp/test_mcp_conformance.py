"""The official MCP client conformance suite (``@modelcontextprotocol/conformance``) against
kova's conformance client command (``conformance_client.py``, built on ``McpClient``).

Here a representative scenario of each kind runs (a few seconds each); CI runs the whole
``core`` suite with ``.ci/mcp-conformance.sh`` (including ``sse-retry``, whose wall-clock
tolerance of 200 ms is left out here so a busy test machine cannot make it flaky). The
runner's scenario servers listen on every interface, so the runner runs in a private
network namespace with only loopback up.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import trio
from npm_env import CONFORMANCE, node_22, require_npm_packages

CLIENT = Path(__file__).with_name("conformance_client.py")


def _namespace_prefix() -> list[str]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip to run the runner in a loopback-only namespace")
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "conformance"]


@pytest.mark.parametrize(
    "scenario",
    [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "auth/token-endpoint-auth-basic",
        "auth/client-credentials-jwt",
        "auth/cross-app-access-complete-flow",
    ],
)
async def test_conformance_scenario(scenario, tmp_path):
    require_npm_packages()
    node = node_22()
    assert node is not None, "Node >= 22 missing: .ci/mcp-setup.sh installs one"
    command = [
        *_namespace_prefix(),
        node,
        str(CONFORMANCE),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "-o",
        str(tmp_path / "results"),
    ]
    with trio.fail_after(120):
        result = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False, cwd=tmp_path
        )
    report = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, report
    checks = [
        check
        for path in (tmp_path / "results").rglob("checks.json")
        for check in json.loads(path.read_text())
    ]
    assert any(check["status"] == "SUCCESS" for check in checks), report
    failed = [check["id"] for check in checks if check["status"] in ("FAILURE", "WARNING")]
    assert failed == [], report
