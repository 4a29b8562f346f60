"""Over SSE, a call made after the server became unreachable, before kova saw the event stream
end, provably never reached it (issue 28, item 8): it is sent again on the next session (or is
McpUnavailableError), never "may or may not have run".

A real MCP SSE server (kova's test server, written with the ``mcp`` package) behind a loopback
proxy the test can cut: closing the proxy's listener and its message connections makes the
server unreachable, while the event stream is held open (as a server that just died looks
until the client reads the end of its stream), so the calls are made in that window every
time, not only when the timing happens to fall so.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
import trio
from mcp_fixtures import start_server

import kova
from kova.mcp import McpClient, ReconnectPolicy, SseTransport

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

GUARD = 60
FAST = ReconnectPolicy(initial=0.05, maximum=0.25)


class CuttableProxy:
    """Forwards loopback TCP connections to ``upstream``; :meth:`cut` refuses new ones, closes
    the message connections and holds the event streams (GET) open without a byte more, until
    :meth:`release_streams`; :meth:`reopen` listens again on the same port."""

    def __init__(self, nursery: trio.Nursery, upstream: int) -> None:
        self._nursery = nursery
        self._upstream = upstream
        self.port = 0
        self._listen_scope = trio.CancelScope()
        self._messages: list[trio.SocketStream] = []
        self._held: list[trio.SocketStream] = []
        self._holding = False

    async def listen(self) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        self._listen_scope = trio.CancelScope()
        self._nursery.start_soon(self._accept, listeners[0], self._listen_scope)

    async def _accept(self, listener: trio.SocketListener, scope: trio.CancelScope) -> None:
        with scope:
            async with listener:
                while True:
                    client = await listener.accept()
                    self._nursery.start_soon(self._pipe, client)

    async def _pipe(self, client: trio.SocketStream) -> None:
        async with client, await trio.open_tcp_stream("127.0.0.1", self._upstream) as upstream:
            try:
                first = await client.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            stream = first.startswith(b"GET ")
            (self._held if stream else self._messages).append(client)

            async def down() -> None:
                while data := await upstream.receive_some(65536):
                    if self._holding and stream:
                        await trio.sleep_forever()  # held: the client hears nothing, no EOF
                    await client.send_all(data)

            async def up() -> None:
                await upstream.send_all(first)
                while data := await client.receive_some(65536):
                    await upstream.send_all(data)

            async def pump(direction: Callable[[], Awaitable[None]]) -> None:
                with contextlib.suppress(
                    trio.BrokenResourceError, trio.ClosedResourceError, OSError
                ):
                    await direction()
                nursery.cancel_scope.cancel()  # one side ended: the connection is over

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, down)
                nursery.start_soon(pump, up)

    async def cut(self) -> None:
        await trio.sleep(0.1)  # the last POST's own response is read to its end
        self._holding = True
        self._listen_scope.cancel()
        for client in self._messages:
            await client.aclose()
        self._messages.clear()
        await trio.sleep(0.05)  # the listener is closed: connecting is refused from now on

    async def release_streams(self) -> None:
        for client in self._held:
            await client.aclose()
        self._held.clear()
        self._holding = False

    async def reopen(self) -> None:
        await self.listen()


async def test_calls_made_while_the_server_is_unreachable_are_sent_again() -> None:
    server = start_server("sse")
    upstream = int(server.base_url.rsplit(":", 1)[1])
    try:
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                proxy = CuttableProxy(nursery, upstream)
                await proxy.listen()
                transport = SseTransport(f"http://127.0.0.1:{proxy.port}/sse")
                async with McpClient.connect(
                    transport, reconnect=FAST, wait_for_connection=True
                ) as client:
                    assert (await client.tools_call("echo", {"text": "first"})).text == "first"
                    await proxy.cut()
                    assert client.state.status == "connected"  # kova has not noticed
                    results: list[str] = []
                    errors: list[BaseException] = []

                    async def call(tag: str) -> None:
                        # echo is not annotated: were it thought sent, it could not be replayed.
                        try:
                            result = await client.tools_call("echo", {"text": tag})
                        except kova.KovaError as exc:
                            errors.append(exc)
                        else:
                            results.append(result.text)

                    async with trio.open_nursery() as calls:
                        for number in range(8):
                            calls.start_soon(call, str(number))
                        await trio.sleep(0.5)  # every POST was refused by now
                        await proxy.release_streams()
                        await proxy.reopen()
                    assert errors == []
                    assert sorted(results) == [str(n) for n in range(8)]
                    assert client.state.session == 2
                nursery.cancel_scope.cancel()
    finally:
        server.process.kill()
        server.process.wait()
        assert server.process.stdout is not None
        server.process.stdout.close()


async def test_calls_made_while_the_server_is_unreachable_are_unavailable_not_interrupted() -> None:
    server = start_server("sse")
    upstream = int(server.base_url.rsplit(":", 1)[1])
    try:
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                proxy = CuttableProxy(nursery, upstream)
                await proxy.listen()
                transport = SseTransport(f"http://127.0.0.1:{proxy.port}/sse")
                async with McpClient.connect(transport, reconnect=FAST) as client:
                    await client.tools_list()
                    await proxy.cut()
                    errors: list[BaseException] = []

                    async def call(tag: str) -> None:
                        with pytest.raises(kova.KovaError) as caught:
                            await client.tools_call("echo", {"text": tag})
                        errors.append(caught.value)

                    async with trio.open_nursery() as calls:
                        for number in range(4):
                            calls.start_soon(call, str(number))
                    await proxy.release_streams()
                    # Never reached the server, which stayed unreachable: unavailable.
                    assert [type(error) for error in errors] == [kova.McpUnavailableError] * 4
                nursery.cancel_scope.cancel()
    finally:
        server.process.kill()
        server.process.wait()
        assert server.process.stdout is not None
        server.process.stdout.close()
