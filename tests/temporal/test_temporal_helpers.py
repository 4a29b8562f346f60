"""The suite's own processes cannot outlive it: a Temporal dev server started the way the
session fixture starts it, and the time-skipping test server started through the tied
executable the approval tests give the Temporal SDK, die with the process that started
them, even when that process is SIGKILLed (as a killed pytest is) and has no chance to stop
them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

HERE = Path(__file__).parent

# Stand-ins for pytest: each starts a server as the suite does, says READY, then waits.
STARTERS = {
    "temporal": """\
import sys, time
sys.path.insert(0, sys.argv[1])
from temporal_helpers import free_port, start_dev_server
server = start_dev_server(free_port())
print("READY", flush=True)
time.sleep(120)
""",
    "temporal-test-server": """\
import asyncio, pathlib, sys
sys.path.insert(0, sys.argv[1])
from temporal_helpers import TEST_SERVER, tied_executable
from temporalio.testing import WorkflowEnvironment

async def main():
    path = tied_executable(TEST_SERVER, pathlib.Path(sys.argv[2]))
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(path))
    print("READY", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
""",
}


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
                if os.path.basename(child.cmdline()[0]) == program:
                    return child.pid
        assert time.monotonic() < deadline, f"{program} is not a child of the starter"
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("program", sorted(STARTERS))
def test_a_server_dies_with_the_sigkilled_process_that_started_it(
    program: str, tmp_path: Path
) -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTERS[program], str(HERE), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    server = 0
    try:
        assert starter.stdout is not None
        assert starter.stdout.readline().strip() == "READY"
        server = _server_of(starter.pid, program)
        starter.send_signal(signal.SIGKILL)  # no finally, no atexit: as a killed pytest
        starter.wait()
        deadline = time.monotonic() + 15
        while _alive(server):
            assert time.monotonic() < deadline, f"{program} outlived its parent"
            time.sleep(0.02)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        if server and _alive(server):
            os.kill(server, signal.SIGKILL)
