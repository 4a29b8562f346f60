"""Streamable HTTP servers that die and come back on the same port, with nobody calling
``reconnect()``: kova's test server (written with the ``mcp`` package; answers a stale
session with 404) and ``@modelcontextprotocol/server-everything`` (answers 400 "No valid
session ID provided").

Real processes, real time: how long a process takes to start, or a connection attempt to be
refused, depends on the machine's load, so these tests assert what the client does rather
than how long the I/O took. Calls fail fast while the server is down (no I/O: the actor
knows it is down, even while it is trying again); once the server is back, the actor's next
attempt succeeds on its own, with no call to ``reconnect()``, and the calls work again. The
backoff's exact schedule (a server that is back is found within ``maximum``) is pinned on
the fake clock in test_mcp_recovery.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import attrs
import httpx2
import psutil
import pytest
import trio
from mcp_fixtures import SERVER
from npm_env import EVERYTHING, PIN_LOOPBACK, require_npm_packages, system_node

import kova
from kova.mcp import McpClient, McpConnectionState, ReconnectPolicy, StreamableHttpTransport

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

GUARD = 60
FAST = ReconnectPolicy(initial=0.05, maximum=0.25)


@attrs.define
class Server:
    """A restartable server process on a fixed loopback port."""

    start: Callable[[int], tuple[subprocess.Popen[bytes], int]]
    process: subprocess.Popen[bytes] | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def up(self) -> None:
        self.process, self.port = await trio.to_thread.run_sync(self.start, self.port)

    async def kill(self) -> None:
        process = self.process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        await trio.to_thread.run_sync(process.wait)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        self.process = None


def _start_test_server(port: int) -> tuple[subprocess.Popen[bytes], int]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", "--port", str(port)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError(f"the test server did not start: {line!r}")
    return process, int(line.split()[1])


def _start_everything(port: int) -> tuple[subprocess.Popen[bytes], int]:
    node = system_node()
    assert node is not None
    env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port), "HOME": os.environ["HOME"]}
    process = subprocess.Popen(
        [node, "--import", PIN_LOOPBACK.as_uri(), str(EVERYTHING), "streamableHttp"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    for raw in process.stderr:
        line = raw.decode()
        if line.startswith("KOVA_LISTENING "):
            return process, int(line.split()[2])
    process.kill()
    process.wait()
    raise RuntimeError("server-everything did not start")


@pytest.fixture(params=["mcp-package", "server-everything"])
def server(request: pytest.FixtureRequest) -> Server:
    if request.param == "server-everything":
        require_npm_packages()
        return Server(start=_start_everything)
    return Server(start=_start_test_server)


Changes = list[tuple[float, McpConnectionState]]


def _recording() -> tuple[Changes, Callable[[McpConnectionState], None]]:
    changes: Changes = []
    return changes, lambda state: changes.append((trio.current_time(), state))


def _assert_recovered_by_itself(changes: Changes, back: float) -> None:
    """The server was listening again by ``back`` (``up()`` returned; it may have listened a
    little earlier, and the actor may already have connected): the first attempt the actor
    started after that succeeded (one under way at ``back`` may have failed: it may have
    begun before the server listened), and it opened exactly one new session."""
    statuses = [state.status for time, state in changes if time >= back]
    if "connecting" in statuses:
        attempt = statuses[statuses.index("connecting") :]
        assert attempt[1:2] == ["connected"], statuses
    sessions = [state.session for _, state in changes if state.status == "connected"]
    assert sessions == [1, 2], sessions


def _echo(server: Server) -> tuple[str, dict[str, str], str]:
    if server.start is _start_everything:
        return "echo", {"message": "hi"}, "Echo: hi"
    return "echo", {"text": "hi"}, "hi"


async def test_server_restarted_while_idle_is_recovered_without_reconnect(server):
    tool, arguments, expected = _echo(server)
    await server.up()
    changes, record = _recording()
    try:
        with trio.fail_after(GUARD):
            async with McpClient.connect(
                StreamableHttpTransport(server.url), reconnect=FAST, on_state_change=record
            ) as client:
                assert (await client.tools_call(tool, arguments)).text == expected
                await server.kill()
                # Nobody calls; the GET stream breaks and the actor finds the server gone.
                await client.wait_for_state("unavailable")
                start = trio.current_time()
                with pytest.raises(kova.McpUnavailableError, match="is unavailable since"):
                    await client.tools_call(tool, arguments)
                assert trio.current_time() - start < 0.5  # failed fast: no I/O waited for
                await server.up()
                back = trio.current_time()
                state = await client.wait_for_state("connected")
                _assert_recovered_by_itself(changes, back)
                assert state.session == 2
                assert (await client.tools_call(tool, arguments)).text == expected
    finally:
        if server.process is not None:
            await server.kill()


async def test_server_restarted_under_calls_is_recovered_without_reconnect(server):
    tool, arguments, expected = _echo(server)
    await server.up()
    outcomes: list[str] = []
    changes, record = _recording()
    try:
        with trio.fail_after(GUARD):
            async with McpClient.connect(
                StreamableHttpTransport(server.url), reconnect=FAST, on_state_change=record
            ) as client:
                back = trio.Event()

                async def keep_calling() -> None:
                    while True:
                        try:
                            result = await client.tools_call(tool, arguments)
                        except kova.McpUnavailableError:
                            outcomes.append("unavailable")
                        except kova.McpCallInterruptedError:
                            outcomes.append("interrupted")
                        else:
                            assert result.text == expected
                            outcomes.append("ok")
                            if back.is_set():
                                return
                        await trio.sleep(0.02)

                back_at: list[float] = []
                assert (await client.tools_call(tool, arguments)).text == expected
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(keep_calling)
                    await trio.sleep(0.3)
                    await server.kill()
                    # A new call fails fast while the server is down (a call that was in
                    # flight waits to be sent again, or to learn it may not be).
                    await client.wait_for_state("unavailable")
                    start = trio.current_time()
                    with pytest.raises(kova.McpUnavailableError):
                        await client.tools_call(tool, arguments)
                    assert trio.current_time() - start < 0.5  # no I/O waited for
                    await trio.sleep(1.5)
                    await server.up()
                    back_at.append(trio.current_time())
                    back.set()
                # The calls recovered with the session the actor opened by itself.
                _assert_recovered_by_itself(changes, back_at[0])
                assert client.state.session == 2
    finally:
        if server.process is not None:
            await server.kill()
    # Every call either worked or said clearly why not; none timed out.
    assert set(outcomes) <= {"ok", "unavailable", "interrupted"}
    assert outcomes[-1] == "ok"


class SessionSpy(httpx2.Auth):
    """Remembers the ``Mcp-Session-Id`` the client sends (to end that session from outside)."""

    def __init__(self) -> None:
        self.session_id: str | None = None

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        self.session_id = request.headers.get("mcp-session-id", self.session_id)
        yield request


async def test_stale_session_call_is_replayed_since_it_never_ran(server):
    """The server forgets the session (we DELETE it from outside) and the next call comes
    before the client notices: the answer "unknown session" (404 from the mcp package's
    server, 400 from server-everything) proves the call did not run, so it is sent again on
    a new session although echo is not annotated."""
    tool, arguments, expected = _echo(server)
    await server.up()
    spy = SessionSpy()
    try:
        with trio.fail_after(GUARD):
            async with McpClient.connect(
                StreamableHttpTransport(server.url, http_auth=spy), reconnect=FAST
            ) as client:
                assert (await client.tools_call(tool, arguments)).text == expected
                assert spy.session_id is not None
                async with httpx2.AsyncClient() as http:
                    ended = await http.delete(
                        server.url, headers={"mcp-session-id": spy.session_id}
                    )
                assert ended.status_code in (200, 204)
                assert (await client.tools_call(tool, arguments)).text == expected
                assert client.state.session == 2
    finally:
        if server.process is not None:
            await server.kill()


def _task_count() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(
            count(child) for nursery in task.child_nurseries for child in nursery.child_tasks
        )

    return count(trio.lowlevel.current_root_task())


async def test_cancelled_calls_release_their_socket_and_task():
    """server-everything keeps a cancelled request's SSE response open, and the mcp package
    kept the POST (one socket, one task) until ``sse_read_timeout``; kova closes it when it
    sends ``notifications/cancelled``. (Without that, this test holds 100 more fds.)"""
    require_npm_packages()
    server = Server(start=_start_everything)
    tool, arguments = "trigger-long-running-operation", {"duration": 1000, "steps": 1}
    process = psutil.Process()
    await server.up()
    try:
        with trio.fail_after(GUARD):
            async with McpClient.connect(StreamableHttpTransport(server.url)) as client:

                async def cancelled_calls(count: int) -> None:
                    # 25 at a time, each cancelled once the server is working on it.
                    for _ in range(count // 25):
                        with trio.move_on_after(0.3):
                            async with trio.open_nursery() as nursery:
                                for _ in range(25):
                                    nursery.start_soon(client.tools_call, tool, arguments)
                    # The aborted POSTs unwind in the mcp package's task group.
                    await trio.sleep(0.3)

                await cancelled_calls(25)
                fds, tasks = process.num_fds(), _task_count()
                await cancelled_calls(100)
                assert process.num_fds() - fds <= 2
                assert _task_count() - tasks <= 2
                assert await client.tools_list() != ()
    finally:
        if server.process is not None:
            await server.kill()
