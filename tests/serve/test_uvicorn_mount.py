"""``kova.serve.app`` mounted in a FastAPI app on uvicorn (asyncio) through
``kova.asyncio.asgi_app``: the app (tests/serve/uvicorn_app.py) runs in a subprocess with
warnings as errors, its model is kova's fake OpenAI server in this process, and the official
``openai`` and ``mcp`` clients drive it over loopback. A client leaving mid-stream frees the
turn's model connection in the app's process; the app shuts down cleanly."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2
import openai
import psutil
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from kova.testing import open_openai_server

from ._agents import TOKEN, model

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

APP = Path(__file__).with_name("uvicorn_app.py")
STARTUP = 60.0
"""Real time: two processes on a shared machine."""

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


class Served:
    def __init__(self, process: trio.Process, url: str, model_port: int) -> None:
        self.process = process
        self.url = url
        self.model_port = model_port
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def model_connections(self) -> int:
        """Connections the app's process holds open to the fake model."""
        return sum(
            1
            for c in psutil.Process(self.process.pid).net_connections(kind="tcp")
            if c.raddr and c.raddr.port == self.model_port
        )

    async def released_within(self, seconds: float) -> float | None:
        start = trio.current_time()
        while trio.current_time() - start < seconds:
            if self.model_connections() == 0:
                return trio.current_time() - start
            await trio.sleep(0.002)
        return None


async def _pump(stream: trio.abc.ReceiveStream, into: list[str]) -> None:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *whole, buffer = buffer.split(b"\n")
        into.extend(raw.decode(errors="replace") for raw in whole)


@asynccontextmanager
async def on_uvicorn() -> AsyncIterator[tuple[Served, object]]:
    async with open_openai_server(model) as fake:
        port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
        command = [sys.executable, "-W", "error", str(APP), fake.base_url, TOKEN]
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        served = Served(process, "", port)
        try:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None
                assert process.stderr is not None
                nursery.start_soon(_pump, process.stdout, served.stdout)
                nursery.start_soon(_pump, process.stderr, served.stderr)
                with trio.fail_after(STARTUP):
                    while not any(line.startswith("PORT ") for line in served.stdout):
                        if process.returncode is not None:
                            raise AssertionError("\n".join(served.stderr))
                        await trio.sleep(0.02)
                    (line,) = [line for line in served.stdout if line.startswith("PORT ")]
                    served.url = f"http://127.0.0.1:{line.split()[1]}"
                    async with httpx2.AsyncClient() as client:
                        while True:
                            try:
                                (await client.get(served.url + "/health")).raise_for_status()
                                break
                            except httpx2.TransportError:
                                await trio.sleep(0.05)
                yield served, fake
                process.send_signal(signal.SIGINT)
                with trio.fail_after(STARTUP):
                    await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    errors = "\n".join(served.stderr)
    assert "Traceback" not in errors, errors
    assert "guest run got abandoned" not in errors, errors
    assert served.stdout[-2:] == ["LIFESPAN CLOSED", "STOPPED"], served.stdout


async def test_the_official_clients_work_through_the_mount_and_leaving_frees_the_turn() -> None:
    async with on_uvicorn() as (served, _fake):
        async with httpx2.AsyncClient() as http:
            health = (await http.get(served.url + "/health")).json()
            refused = await http.get(served.url + "/agents/v1/models")
        base = served.url + "/agents/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=TOKEN, timeout=30) as client:
            answer = await client.chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "plain"}]
            )
            pieces = []
            stream = await client.chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "streamed"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    pieces.append(chunk.choices[0].delta.content)
            response = await client.responses.create(model="helper", input="responses")
            # Clients leaving mid-stream: the turn's model connection in the app's process
            # is closed each time.
            freed: list[float] = []
            for _ in range(10):
                stream = await client.chat.completions.create(
                    model="helper", messages=[{"role": "user", "content": "hold"}], stream=True
                )
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        break
                assert served.model_connections() == 1
                await stream.close()
                released = await served.released_within(2.0)
                assert released is not None
                freed.append(released)
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as mcp_http:
            transport = streamable_http_client(served.url + "/agents/mcp", http_client=mcp_http)
            async with Client(transport) as mcp_client:
                tools = await mcp_client.list_tools()
                result = await mcp_client.call_tool("helper", {"prompt": "over mcp"})
    assert health["ok"] is True
    assert health["loop"] in ("asyncio", "uvloop")  # uvicorn's default: uvloop when installed
    assert refused.status_code == 401
    assert answer.choices[0].message.content == "You said: plain"
    assert "".join(pieces) == "You said: streamed"
    assert response.output_text == "You said: responses"
    assert [tool.name for tool in tools.tools] == ["helper"]
    assert result.content[0].text == "You said: over mcp"  # type: ignore[union-attr]
    print(f"released after a client left: median {statistics.median(freed) * 1000:.0f} ms")
    assert statistics.median(freed) < 0.5
