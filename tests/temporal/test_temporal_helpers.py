"""The suite's own processes cannot outlive it: a Temporal dev server started the way the
session fixture starts it dies with the process that started it, even when that process is
SIGKILLed (as a killed pytest is) and has no chance to stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent

# A stand-in for pytest: starts a dev server as the fixture does, says its pid, then waits.
STARTER = """\
import sys, time
sys.path.insert(0, sys.argv[1])
from temporal_helpers import free_port, start_dev_server
server = start_dev_server(free_port())
print(server.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its new parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _program(pid: int) -> str:
    return os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_dev_server_dies_with_the_sigkilled_process_that_started_it() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(HERE)], stdout=subprocess.PIPE, text=True
    )
    server = 0
    try:
        assert starter.stdout is not None
        server = int(starter.stdout.readline())
        # The shim exec'd the server in place: that pid is the Temporal CLI itself.
        deadline = time.monotonic() + 10
        while _program(server) != "temporal":
            assert time.monotonic() < deadline, "the shim did not exec the server"
            time.sleep(0.02)
        assert _alive(server)
        starter.send_signal(signal.SIGKILL)  # no finally, no atexit: as a killed pytest
        starter.wait()
        deadline = time.monotonic() + 10
        while _alive(server):
            assert time.monotonic() < deadline, "the dev server outlived its parent"
            time.sleep(0.02)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        if server and _alive(server):
            os.kill(server, signal.SIGKILL)
