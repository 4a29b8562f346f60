"""Fixtures that run the test MCP server (``mcp_test_server.py``) as a child process.

HTTP servers bind 127.0.0.1 port 0 and report the port on stdout; nothing listens on another
interface.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

SERVER = Path(__file__).with_name("mcp_test_server.py")


@attrs.frozen
class RunningServer:
    process: subprocess.Popen[bytes]
    base_url: str

    @property
    def pid(self) -> int:
        return self.process.pid


def start_server(mode: str, *options: str) -> RunningServer:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), mode, *options],
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


@pytest.fixture(scope="module")
def http_server() -> Iterator[RunningServer]:
    """Streamable HTTP, SSE responses."""
    server = start_server("http")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def json_http_server() -> Iterator[RunningServer]:
    """Streamable HTTP, plain JSON responses."""
    server = start_server("http", "--json")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def sse_server() -> Iterator[RunningServer]:
    """The legacy HTTP+SSE transport."""
    server = start_server("sse")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def token_server() -> Iterator[RunningServer]:
    """Streamable HTTP that accepts only ``Authorization: Bearer fresh-token``."""
    server = start_server("http", "--token", "fresh-token")
    yield server
    stop_server(server)


@pytest.fixture
def fresh_http_server() -> Iterator[RunningServer]:
    """A Streamable HTTP server of the test's own (for tests that end its sessions)."""
    server = start_server("http")
    yield server
    stop_server(server)


# The mcp package stops reading httpx2 SSE streams with ``break`` (its own code, not kova's),
# and trio warns when such a half-consumed async generator is garbage collected. The
# warnings are about the vendor's iterators only; everything else still fails the test.
_VENDOR_ASYNCGEN_WARNINGS = (
    "ignore:Async generator 'httpx2.:ResourceWarning",
    "ignore:Async generator 'httpcore2.:ResourceWarning",
    "ignore:Exception ignored in. <async_generator object "
    r"(Response\.aiter_|PoolByteStream\.|EventSource\.):"
    "pytest.PytestUnraisableExceptionWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            for spec in _VENDOR_ASYNCGEN_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(autouse=True)
def _collect_vendor_garbage() -> Iterator[None]:
    """Finalize the vendor's abandoned generators inside the MCP tests, not in a later one."""
    yield
    gc.collect()
