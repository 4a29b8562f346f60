"""Helpers that run the test MCP server (``mcp_test_server.py``) as a child process.

HTTP servers bind 127.0.0.1 port 0 and report the port on stdout; nothing listens on another
interface.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
from tied_process import tied_popen

SERVER = Path(__file__).with_name("mcp_test_server.py")
HOSTILE = Path(__file__).with_name("hostile_server.py")


@attrs.frozen
class RunningServer:
    process: subprocess.Popen[bytes]
    base_url: str

    @property
    def pid(self) -> int:
        return self.process.pid


def start_server(mode: str, *options: str, script: Path = SERVER) -> RunningServer:
    """Start the server (tied to this process's life: a killed test run leaves none; call
    it from the main thread, see :mod:`tied_process`)."""
    process = tied_popen(
        [sys.executable, str(script), mode, *options],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError(f"test MCP server ({mode}) did not start: {line!r}")
    return RunningServer(process=process, base_url=f"http://127.0.0.1:{int(line.split()[1])}")


def stop_server(server: RunningServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    assert server.process.stdout is not None
    server.process.stdout.close()
