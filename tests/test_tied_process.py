"""The suite's own processes cannot outlive it: each server a fixture starts (the Temporal
dev server as the session fixture starts it, the time-skipping test server through the tied
executable the approval tests give the Temporal SDK, headless Chromium with its helper
processes, the MCP test server) dies with the process that started it, even when that
process is SIGKILLed (as a killed pytest is) and has no chance to stop it
(:mod:`tied_process`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

TESTS = Path(__file__).parent

# Stand-ins for pytest: each starts a server as the suite does, says READY, then waits.
# argv[1] is the tests folder, argv[2] a temporary folder.
STARTERS = {
    "temporal": """\
import sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/temporal"]
from temporal_helpers import free_port, start_dev_server
server = start_dev_server(free_port())
print("READY", flush=True)
time.sleep(120)
""",
    "temporal-test-server": """\
import asyncio, pathlib, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/temporal"]
from temporal_helpers import TEST_SERVER, tied_executable
from temporalio.testing import WorkflowEnvironment

async def main():
    path = tied_executable(TEST_SERVER, pathlib.Path(sys.argv[2]))
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(path))
    print("READY", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
""",
    "chromium": """\
import sys, time
sys.path[:0] = [sys.argv[1]]
from web._browser import find_chromium, start_chromium
running = start_chromium(find_chromium())  # kept: collected, it would stop the browser
browser = next(running)
print("READY", flush=True)
time.sleep(120)
""",
    "mcp-test-server": """\
import sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/mcp"]
from mcp_fixtures import start_server
server = start_server("http")
print("READY", flush=True)
time.sleep(120)
""",
}

SERVERS: dict[str, Callable[[list[str]], bool]] = {
    "temporal": lambda command: os.path.basename(command[0]) == "temporal",
    "temporal-test-server": lambda command: os.path.basename(command[0]) == "temporal-test-server",
    # Chromium rewrites its command line into one string.
    "chromium": lambda command: os.path.basename(command[0].split(" ")[0]) == "chromium",
    "mcp-test-server": lambda command: command[1:2] == [str(TESTS / "mcp" / "mcp_test_server.py")],
}
"""How each server's process is told from the exec shim it starts as (same pid)."""


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its new parent to reap it."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _server_of(starter: int, program: str) -> int:
    """The pid of ``program`` among ``starter``'s children, once the exec shim has run it in
    place (the shim is a Python process for a moment)."""
    deadline = time.monotonic() + 10
    while True:
        for child in psutil.Process(starter).children():
            with contextlib.suppress(psutil.Error, IndexError):
                if SERVERS[program](child.cmdline()):
                    return child.pid
        assert time.monotonic() < deadline, f"{program} is not a child of the starter"
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("program", sorted(STARTERS))
def test_a_server_dies_with_the_sigkilled_process_that_started_it(
    program: str, tmp_path: Path
) -> None:
    if program == "chromium":
        from web._browser import find_chromium, loud_skip_message

        if find_chromium() is None:
            pytest.skip(loud_skip_message())
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTERS[program], str(TESTS), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    server = 0
    helpers: list[int] = []
    try:
        assert starter.stdout is not None
        assert starter.stdout.readline().strip() == "READY"
        server = _server_of(starter.pid, program)
        # The processes the server started (Chromium's zygotes, GPU and network processes).
        helpers = [child.pid for child in psutil.Process(server).children(recursive=True)]
        assert helpers or program != "chromium"
        starter.send_signal(signal.SIGKILL)  # no finally, no atexit: as a killed pytest
        starter.wait()
        deadline = time.monotonic() + 15
        while alive := [pid for pid in (server, *helpers) if _alive(pid)]:
            assert time.monotonic() < deadline, f"{program} outlived its parent: {alive}"
            time.sleep(0.02)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        for pid in (server, *helpers) if server else ():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
