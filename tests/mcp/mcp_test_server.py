"""A real MCP server for kova's tests, written with the ``mcp`` package's ``MCPServer``.

Used in process (``build_server()`` + ``InProcessTransport``) and as a child process::

    python tests/mcp/mcp_test_server.py stdio
    python tests/mcp/mcp_test_server.py http [--json] [--token T] [--port N]
    python tests/mcp/mcp_test_server.py sse [--token T]

The HTTP modes bind ``127.0.0.1`` port 0 and print ``PORT <n>`` on stdout once listening.
``--token T`` makes every HTTP request need ``Authorization: Bearer T`` (anything else gets
``401``). ``POST /control/forget`` makes the server answer ``404`` to every session it has
issued so far (the Streamable HTTP way of saying "session ended"); ``GET /control/stats``
returns how many sessions it issued and how many requests it rejected with ``401``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import anyio
import mcp_types as mt
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import BaseModel

# Every tool and resource is async: the server would run a sync one in a worker thread,
# which trio's MockClock cannot see (it would jump the clock while the thread runs).

# A 1x1 transparent PNG.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


class Answer(BaseModel):
    name: str
    age: int


class Weather(BaseModel):
    city: str
    celsius: float


READ_ONLY = mt.ToolAnnotations(read_only_hint=True)
IDEMPOTENT = mt.ToolAnnotations(read_only_hint=False, idempotent_hint=True)


def build_server(events: list[str] | None = None) -> MCPServer:
    """The test server. ``events`` (in process only) records what the server saw."""
    seen: list[str] = events if events is not None else []
    server = MCPServer("kova-test-server", instructions="a server for kova's tests")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def picture() -> list[Any]:
        """A caption and a tiny PNG."""
        return [
            mt.TextContent(type="text", text="a pixel"),
            mt.ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        ]

    @server.tool()
    async def attachment() -> list[Any]:
        """An embedded text resource and an embedded image blob."""
        return [
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(
                    uri="kova://notes/1", mime_type="text/plain", text="note one"
                ),
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="kova://pixel.png", mime_type="image/png", blob=PNG_1X1
                ),
            ),
        ]

    @server.tool()
    async def fail(reason: str) -> str:
        """Fail inside the tool (an isError result)."""
        raise ToolError(reason)

    @server.tool()
    async def protocol_error() -> str:
        """Answer with a JSON-RPC error instead of a result."""
        raise MCPError(code=-32099, message="the server refuses")

    @server.tool(annotations=READ_ONLY)
    async def wait(seconds: float, tag: str = "") -> str:
        """Sleep; records start, finish and cancellation as events. Read-only."""
        seen.append(f"started {tag}")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            seen.append(f"cancelled {tag}")
            raise
        seen.append(f"finished {tag}")
        return f"waited {seconds}"

    @server.tool()
    async def write_after(seconds: float, tag: str = "") -> str:
        """Sleep, then record a write (not annotated: may not be replayed)."""
        seen.append(f"started {tag}")
        await anyio.sleep(seconds)
        seen.append(f"wrote {tag}")
        return f"wrote {tag}"

    @server.tool(annotations=mt.ToolAnnotations(title="Weather", read_only_hint=True))
    async def weather(city: str) -> Weather:
        """The weather in a city, as structured content."""
        return Weather(city=city, celsius=21.5)

    @server.tool()
    async def count_up(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted {steps}"

    @server.tool()
    async def say(text: str, ctx: Context) -> str:
        """Send ``text`` as a warning log message to the client."""
        with warnings.catch_warnings():
            # Logging is deprecated in the 2026-07-28 protocol; these tests speak 2025-11-25.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.warning(text, logger_name="kova-test")
        return "said"

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Tell the client that resource ``uri`` changed."""
        await ctx.session.send_resource_updated(uri)
        return "touched"

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots, as ``uri name`` lines."""
        with warnings.catch_warnings():
            # Roots are deprecated in the 2026-07-28 protocol; these tests speak 2025-11-25.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            pending = ctx.session.list_roots()
        result = await pending
        return "\n".join(f"{root.uri} {root.name}" for root in result.roots)

    @server.tool()
    async def big(size: int) -> str:
        """A text of ``size`` characters (for message size limits)."""
        return "x" * size

    @server.tool(annotations=READ_ONLY)
    async def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(annotations=IDEMPOTENT)
    async def hang_once(marker: str) -> str:
        """Hang forever the first time (creating ``marker``); answer on later calls."""
        path = anyio.Path(marker)
        if await path.exists():
            return "recovered"
        await path.write_text(str(os.getpid()))
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool()
    async def exit_now(said: str = "") -> str:
        """Exit the server process mid-call (with status 3), first writing ``said`` to
        stderr."""
        if said:
            sys.stderr.write(said + "\n")
            sys.stderr.flush()
        os._exit(3)

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called ``name`` and tell the client the tool list changed."""

        async def extra() -> str:
            return f"I am {name}"

        server.add_tool(extra, name=name, description=f"a tool added at run time: {name}")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    # swap's positive signal: the client listed the tools again after its list_changed.
    relisted: list[anyio.Event] = []
    listing = server.list_tools

    listings = [0]  # how many times the tools were listed
    chatty: list[Any] = []  # sessions told "changed" after every listing (see chatter)

    async def list_tools() -> list[Any]:
        tools = await listing()
        listings[0] += 1
        for listed in relisted:
            listed.set()
        relisted.clear()
        for session in chatty:
            await session.send_tool_list_changed()
        return tools

    @server.tool()
    async def listed() -> int:
        """How many times the tools were listed."""
        return listings[0]

    @server.tool()
    async def flood(count: int, ctx: Context) -> str:
        """Send ``notifications/tools/list_changed`` ``count`` times."""
        for _ in range(count):
            await ctx.session.send_tool_list_changed()
        return f"sent {count}"

    @server.tool()
    async def chatter(ctx: Context) -> str:
        """From now on, say "changed" to this session with every listing (a server that
        takes its own listing for a change), and once now."""
        chatty.append(ctx.session)
        await ctx.session.send_tool_list_changed()
        return "chatty"

    server.list_tools = list_tools  # type: ignore[method-assign]

    @server.tool()
    async def swap(add: str, remove: str, ctx: Context) -> str:
        """Add a tool called ``add`` and remove the one called ``remove``, tell the client the
        tool list changed, and answer once the client has listed the tools again."""

        async def extra() -> str:
            return f"I am {add}"

        server.add_tool(extra, name=add, description=f"a tool added at run time: {add}")
        server.remove_tool(remove)
        listed = anyio.Event()
        relisted.append(listed)
        await ctx.session.send_tool_list_changed()
        with anyio.fail_after(30):
            await listed.wait()
        return f"added {add}, removed {remove}"

    @server.tool()
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model (sampling)."""
        with warnings.catch_warnings():
            # Sampling is deprecated in the 2026-07-28 protocol; these tests speak 2025-11-25.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await ctx.session.create_message(
                [
                    mt.SamplingMessage(
                        role="user", content=mt.TextContent(type="text", text=question)
                    )
                ],
                max_tokens=64,
                system_prompt="answer briefly",
                temperature=0.5,
            )
        content = result.content
        text = content.text if isinstance(content, mt.TextContent) else repr(content)
        return f"{result.model}: {text} ({result.stop_reason})"

    @server.tool()
    async def ask_user(ctx: Context) -> str:
        """Ask the user for a name and an age (elicitation)."""
        result = await ctx.elicit("Who are you?", schema=Answer)
        if result.action == "accept":
            return f"hello {result.data.name}, {result.data.age}"
        return f"no answer: {result.action}"

    @server.resource("kova://greeting", name="greeting", mime_type="text/plain")
    async def greeting() -> str:
        return "hello from the server"

    @server.resource("kova://items/{item_id}", name="item", mime_type="application/json")
    async def item(item_id: str) -> str:
        return json.dumps({"id": item_id})

    @server.resource("kova://pixel", name="pixel", mime_type="image/png")
    async def pixel() -> bytes:
        import base64

        return base64.b64decode(PNG_1X1)

    # MCPServer has no decorator for resources/subscribe; the low-level server takes handlers.
    lowlevel = server._lowlevel_server

    async def subscribe(ctx: Any, params: mt.SubscribeRequestParams) -> mt.EmptyResult:
        seen.append(f"subscribed {params.uri}")
        return mt.EmptyResult()

    async def unsubscribe(ctx: Any, params: mt.UnsubscribeRequestParams) -> mt.EmptyResult:
        seen.append(f"unsubscribed {params.uri}")
        return mt.EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", mt.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", mt.UnsubscribeRequestParams, unsubscribe)

    @server.prompt(name="review", description="Review some code")
    async def review(code: str) -> str:
        return f"Please review:\n{code}"

    return server


# ---------------------------------------------------------------------------------------------
# Running as a child process


def _control_app(app: Any, token: str | None) -> Any:
    """Wrap the Starlette app: bearer check, session forgetting, stats."""
    issued: set[str] = set()
    forgotten: set[str] = set()
    stats = {"sessions": 0, "unauthorized": 0}

    async def reply(send: Any, status: int, body: bytes, content_type: bytes) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type)],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        path = scope["path"]
        if path == "/control/forget":
            forgotten.update(issued)
            await reply(send, 200, b"{}", b"application/json")
            return
        if path == "/control/stats":
            await reply(send, 200, json.dumps(stats).encode(), b"application/json")
            return
        if token is not None and headers.get("authorization") != f"Bearer {token}":
            stats["unauthorized"] += 1
            await reply(send, 401, b"unauthorized", b"text/plain")
            return
        if headers.get("mcp-session-id") in forgotten:
            await reply(send, 404, b"session not found", b"text/plain")
            return

        async def watching_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", []):
                    if key.decode().lower() == "mcp-session-id" and value.decode() not in issued:
                        issued.add(value.decode())
                        stats["sessions"] += 1
            await send(message)

        await app(scope, receive, watching_send)

    return wrapped


def main(argv: list[str]) -> None:
    mode = argv[0]
    token = argv[argv.index("--token") + 1] if "--token" in argv else None
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 0
    server = build_server()
    if mode == "stdio":
        anyio.run(server.run_stdio_async)
        return

    import socket

    import uvicorn

    if mode == "http":
        app = server.streamable_http_app(json_response="--json" in argv)
    elif mode == "sse":
        app = server.sse_app()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(_control_app(app, token), log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)

    async def serve() -> None:
        import asyncio

        task = asyncio.ensure_future(uvicorn_server.serve(sockets=[sock]))
        while not uvicorn_server.started:  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.01)
        print(f"PORT {port}", flush=True)
        await task

    import asyncio

    asyncio.run(serve())


if __name__ == "__main__":
    main(sys.argv[1:])
