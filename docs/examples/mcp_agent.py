"""An agent using MCP servers: one over stdio, one over Streamable HTTP with a bearer token.

Run it: python docs/examples/mcp_agent.py

The MCP server is this same file started in "server mode" (written with the ``mcp``
package's ``MCPServer``); the model is scripted, so no API key is needed. Swap in a real
provider and real servers, the MCP part stays the same.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import trio

from kova import Message, ToolResult
from kova.agent import AgentBuilder
from kova.mcp import McpClient, StdioTransport, StreamableHttpTransport
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

TOKEN = "s3cret-token"


# ---------------------------------------------------------------------------------------------
# The host's token store: kova asks it for the bearer token, and for a fresh one after a 401.


class StaticTokens:
    async def token(self) -> str:
        await trio.lowlevel.checkpoint()
        return TOKEN

    async def refresh(self) -> str:
        await trio.lowlevel.checkpoint()
        return TOKEN


async def main() -> None:
    # 1. A server over stdio: kova starts the child process and reaps it when done.
    notes = StdioTransport(sys.executable, args=[__file__, "serve-stdio"])

    # 2. A server over Streamable HTTP that wants a bearer token.
    #    (Started here so the example is self-contained; it prints "PORT <n>" when ready.)
    http_server = await trio.lowlevel.open_process(
        [sys.executable, __file__, "serve-http"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert http_server.stdout is not None
    first_line = b""
    while not first_line.endswith(b"\n"):
        first_line += await http_server.stdout.receive_some(1)
    port = int(first_line.split()[1])
    weather = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp", auth=StaticTokens())

    try:
        async with (
            McpClient.connect(notes) as notes_client,
            McpClient.connect(weather) as weather_client,
        ):
            # The scripted "model" calls one tool of each server, then answers.
            model = ScriptedProvider(
                [
                    reply_tool_calls(
                        ("notes__add_note", {"text": "buy snow boots"}),
                        ("weather__forecast", {"city": "Oslo"}),
                    ),
                    reply_text("Noted, and yes: Oslo will be snowy."),
                ]
            )
            builder = AgentBuilder().provider(model)
            # The notes server also has a destructive tool the model must never get.
            await builder.mcp_client(notes_client, "notes", exclude=["delete_all_notes"])
            await builder.mcp_client(weather_client, "weather")
            agent = builder.build()
            print("weather server:", weather_client.state.status)

            async with agent:
                response = await agent.run([Message.user("Note boots; snow in Oslo?")])
            # The model saw the servers' tools under their prefixes ...
            print("tools:", sorted(tool.name for tool in model.requests[0].tools))
            # ... and its calls went to the servers like native tool calls.
            for message in response.new_messages:
                for block in message.content:
                    if isinstance(block, ToolResult):
                        print("tool result:", block.text)
            print(response.text)
            # The host can read the structured form of a result the server sent one for.
            structured = await weather_client.tools_call("forecast_data", {"city": "Oslo"})
            print("structured:", structured.structured)
    finally:
        http_server.terminate()
        await http_server.wait()


# ---------------------------------------------------------------------------------------------
# Server mode (what a real deployment would run elsewhere).


def build_server(kind: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(kind)
    saved: list[str] = []

    async def add_note(text: str) -> str:
        """Save a note."""
        saved.append(text)
        return f"saved note #{len(saved)}: {text}"

    async def delete_all_notes() -> str:
        """Delete every note."""
        saved.clear()
        return "all notes deleted"

    async def forecast(city: str) -> str:
        """Tomorrow's weather for a city."""
        return f"{city}: -3°C and snow"

    async def forecast_data(city: str) -> dict[str, Any]:
        """Tomorrow's weather for a city, as data."""
        return {"city": city, "celsius": -3, "snow": True}

    if kind == "notes":
        server.add_tool(add_note)
        server.add_tool(delete_all_notes)
    else:
        server.add_tool(forecast)
        server.add_tool(forecast_data, structured_output=True)
    return server


def serve_http() -> None:
    import asyncio
    import socket

    import uvicorn

    app = build_server("weather").streamable_http_app()

    async def require_token(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(require_token, log_level="warning"))

    async def serve() -> None:
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.01)
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "serve-stdio":
        import anyio

        anyio.run(build_server("notes").run_stdio_async)
    elif mode == "serve-http":
        serve_http()
    else:
        trio.run(main)
