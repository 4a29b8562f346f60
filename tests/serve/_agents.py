"""Agents for the serve tests: the real OpenAI-compatible provider against kova's fake
server on loopback, so that what the provider's connection does is seen on the wire."""

from __future__ import annotations

import contextlib
import os
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import psutil
import trio

from kova import ToolResult
from kova.agent import AgentBuilder
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import StreamReply, open_openai_server, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kova.agent import Agent
    from kova.testing import FakeOpenAiServer, ScriptRequest

TOKEN = "serve-test-token-0123456789"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "-3°C, snow"}.get(city, "unknown")


async def model(request: ScriptRequest) -> Any:
    """The fake model: ``weather`` calls get_weather then answers with its result; ``hold``
    streams two pieces and stalls with the connection open; ``slow`` never answers;
    anything else is echoed."""
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResult)]
    if results:
        return reply_text(f"It is {results[0].text} in Oslo.")
    prompt = last.text
    if prompt == "weather":
        return reply_tool_calls(("get_weather", {"city": "Oslo"}))
    if prompt == "slow":
        await trio.sleep_forever()
    if prompt == "hold":
        return StreamReply(response=reply_text("a partial answer that stalls"), hold_after=2)
    return StreamReply(response=reply_text(f"You said: {prompt}"), chunk_chars=4)


@asynccontextmanager
async def open_agent(
    name: str = "helper", *, defer: bool = False
) -> AsyncIterator[tuple[Agent, FakeOpenAiServer]]:
    """An agent with get_weather on the fake model; ``defer``: its calls wait for a person
    (``defer_approvals``)."""
    async with open_openai_server(model) as fake:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=fake.base_url, model="m", api_key="k")
        )
        builder = AgentBuilder().provider(provider).name(name).tool(get_weather)
        if defer:
            builder = builder.defer_approvals()
        yield builder.build(), fake


def open_connections(base_url: str) -> int:
    """Connections to the server at ``base_url`` this process holds open (the clients' side):
    a provider connection left behind by a cancelled turn shows here. A socket closed by its
    owner leaves the process's table at once (TIME_WAIT belongs to the kernel).

    On Linux the process's own socket descriptors are asked for their peer: what
    ``psutil.Process().net_connections()`` counts, without reading the machine's whole TCP
    table (5-15 ms a call, thousands of TIME_WAIT lines after a few hundred trials, most of
    the time of the trials here, and blocking the event loop the turn is released in)."""
    port = int(base_url.rsplit(":", 1)[1])
    if not os.path.isdir("/proc/self/fd"):
        return sum(
            1
            for c in psutil.Process().net_connections(kind="tcp")
            if c.raddr and c.raddr.port == port
        )
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile, not connected, not a socket
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(fd))) as sock:  # a copy: closing it is ours
                tcp = sock.type == socket.SOCK_STREAM and sock.family in INET
                if tcp and sock.getpeername()[1] == port:
                    count += 1
    return count


INET = (socket.AF_INET, socket.AF_INET6)


async def released_within(base_url: str, seconds: float) -> float | None:
    """How long until no connection to ``base_url`` is open (None: not within ``seconds``)."""
    start = trio.current_time()
    while trio.current_time() - start < seconds:
        if open_connections(base_url) == 0:
            return trio.current_time() - start
        await trio.sleep(0.002)
    return None
