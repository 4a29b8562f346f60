"""What a notification flood costs kova's MCP client against the official ``mcp`` client, in
the same run (issue 44, item 5: "an SSE notification flood costs kova 2.2-2.8x the official
client's time").

    .venv/bin/python bench/mcp_flood.py [--count 5000] [--rounds 5] [--no-warmup]
                                        [--transports sse http] [--json out.json]

Starts kova's test MCP server (tests/mcp/mcp_test_server.py, its own process) once per
transport, legacy SSE and Streamable HTTP, and in alternating rounds calls its ``flood`` tool
(``count`` ``notifications/tools/list_changed``, then the answer) from each client under
``trio.run``:

- ``kova``: ``McpClient.connect(SseTransport | StreamableHttpTransport)``, which also keeps
  its tool list fresh (coalesced: a few ``tools/list`` per flood);
- ``official``: the ``mcp`` package's ``ClientSession`` over ``sse_client`` /
  ``streamable_http_client``, which only hands each notification to a handler (the floor:
  the same wire, the same server, nothing done per notification).

Prints the median wall time of one flood call and the client process's CPU (every thread)
per notification, and kova's ratio to the official client's figure of the same run. The
server's own work is in neither client's CPU figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "mcp"), str(ROOT / "tests")]  # mcp_fixtures, tied_process

from mcp_fixtures import start_server, stop_server  # noqa: E402

TRANSPORTS = ("sse", "http")


async def _kova(url: str, transport: str, count: int) -> float:
    from kova.mcp import McpClient, SseTransport, StreamableHttpTransport

    made = SseTransport(url) if transport == "sse" else StreamableHttpTransport(url)
    async with McpClient.connect(made, request_timeout=300) as client:
        await client.tools_list()
        started = time.perf_counter()
        result = await client.tools_call("flood", {"count": count})
        took = time.perf_counter() - started
    assert result.text == f"sent {count}", result.text
    return took


async def _official(url: str, transport: str, count: int) -> float:
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    seen = 0

    async def handler(message: Any) -> None:
        nonlocal seen
        seen += 1

    opened = sse_client(url) if transport == "sse" else streamable_http_client(url)
    async with opened as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, message_handler=handler) as session:
            await session.initialize()
            await session.list_tools()
            started = time.perf_counter()
            result = await session.call_tool("flood", {"count": count})
            took = time.perf_counter() - started
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == f"sent {count}", text
    return took


def _measure(client: str, url: str, transport: str, count: int) -> tuple[float, float]:
    """(wall seconds of the flood call, client CPU seconds of the whole run)."""
    gc.collect()
    cpu = time.process_time()
    run = _kova if client == "kova" else _official
    wall = trio.run(run, url, transport, count)
    return wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up floods")
    parser.add_argument("--transports", nargs="+", choices=TRANSPORTS, default=list(TRANSPORTS))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"count": args.count, "rounds": args.rounds}
    for transport in args.transports:
        server = start_server(transport)
        path = "/sse" if transport == "sse" else "/mcp"
        url = server.base_url + path
        samples: dict[str, list[tuple[float, float]]] = {"kova": [], "official": []}
        try:
            if not args.no_warmup:  # imports, first connections
                _measure("kova", url, transport, 100)
                _measure("official", url, transport, 100)
            for number in range(args.rounds):
                order = ("kova", "official") if number % 2 == 0 else ("official", "kova")
                for client in order:
                    samples[client].append(_measure(client, url, transport, args.count))
        finally:
            stop_server(server)
        row: dict[str, float] = {}
        for client, values in samples.items():
            row[f"{client}_wall_s"] = statistics.median(v[0] for v in values)
            row[f"{client}_cpu_us_per_notification"] = (
                statistics.median(v[1] for v in values) / args.count * 1e6
            )
        row["wall_ratio"] = row["kova_wall_s"] / row["official_wall_s"]
        row["cpu_ratio"] = (
            row["kova_cpu_us_per_notification"] / row["official_cpu_us_per_notification"]
        )
        figures[transport] = row
        print(
            f"{transport:5} flood of {args.count}: wall kova {row['kova_wall_s']:.2f} s, "
            f"official {row['official_wall_s']:.2f} s (x{row['wall_ratio']:.2f}); client CPU "
            f"kova {row['kova_cpu_us_per_notification']:.0f} us, official "
            f"{row['official_cpu_us_per_notification']:.0f} us per notification "
            f"(x{row['cpu_ratio']:.2f})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
