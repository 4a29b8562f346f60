"""A real MCP server that counts its starts, for the tests of servers started when needed.

    python tests/mcp/counted_server.py stdio --starts FILE
    python tests/mcp/counted_server.py http

Each start of the process appends a line to ``--starts`` FILE (stdio). The HTTP mode binds
``127.0.0.1`` port 0, prints ``PORT <n>`` and counts the MCP sessions it issued at ``GET
/control/stats`` (the wrapper of ``mcp_test_server.py``). ``--flavour other`` gives the
weather tool another description (a server whose new version changed a tool). The tool
``add_tool`` adds a tool and sends ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer


def build(version: str, flavour: str) -> MCPServer:
    server = MCPServer("counted", version=version)

    @server.tool(description="Get the weather forecast for a city")
    async def forecast(city: str) -> str:
        return f"sunny in {city}"

    @server.tool(
        description=(
            "Convert an amount of money between currencies"
            if flavour == "plain"
            else "Exchange money from one currency into another at today's rate"
        )
    )
    async def convert_currency(amount: float, source: str, target: str) -> str:
        return f"{amount} {source} is {amount * 2} {target}"

    @server.tool(description="Send an email message to a recipient")
    async def send_email(to: str, subject: str) -> str:
        return f"sent {subject!r} to {to}"

    @server.tool(description="Report the process id of this server")
    async def server_pid() -> int:
        return os.getpid()

    @server.tool(description="Add a new tool to this server at run time")
    async def add_tool(name: str, ctx: Context) -> str:
        async def extra() -> str:
            return name

        server.add_tool(extra, name=name, description=f"translate text into {name}")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    return server


def main(argv: list[str]) -> None:
    mode = argv[0]
    # From the environment too: an upgraded server runs the same command (the memory's key).
    version = os.environ.get("COUNTED_VERSION", "1.0.0")
    flavour = os.environ.get("COUNTED_FLAVOUR", "plain")
    server = build(version, flavour)
    if mode == "stdio":
        starts = Path(argv[argv.index("--starts") + 1])
        with starts.open("a") as file:
            file.write(f"{os.getpid()}\n")
        anyio.run(server.run_stdio_async)
        return
    import asyncio
    import socket

    import uvicorn
    from mcp_test_server import _control_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    app = _control_app(server.streamable_http_app(), None)
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def serve() -> None:
        task = asyncio.ensure_future(uvicorn_server.serve(sockets=[sock]))
        while not uvicorn_server.started:  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.01)
        print(f"PORT {port}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main(sys.argv[1:])
