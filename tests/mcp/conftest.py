"""Fixtures for the MCP tests: test servers as child processes, vendor warning filters."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mcp_fixtures import RunningServer, start_server, stop_server

if TYPE_CHECKING:
    from collections.abc import Iterator


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


@pytest.fixture(scope="module")
def sse_token_server() -> Iterator[RunningServer]:
    """The legacy HTTP+SSE transport, accepting only ``Authorization: Bearer fresh-token``."""
    server = start_server("sse", "--token", "fresh-token")
    yield server
    stop_server(server)
