"""A FastAPI app on uvicorn streaming a kova agent through kova.asyncio, driven over loopback.

The app (tests/asyncio/sse_app.py) runs in a subprocess with warnings as errors, its model is
kova's fake OpenAI server in this process (real sockets, real SSE), and these tests are its
HTTP clients. Times are real (two processes), bounded by generous fail_after limits; nothing
waits for a timer to expire except the app's own asyncio.timeout of 0.2 s.
"""

from __future__ import annotations

import gc
import json
import signal
import subprocess
import sys
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import httpx2
import pytest
import trio

from kova.testing import ScriptRequest, StreamReply, open_openai_server, reply_text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

APP = Path(__file__).with_name("sse_app.py")

STARTUP = 60.0
"""Real time: two processes on a shared machine."""

# The tests leave streams mid-way as a browser does; httpx2 (the test's client, not kova)
# then leaves its pool stream's async generator to the garbage collector, and trio warns.
# Only those vendor iterators are let through; the app's own stderr is checked for them too.
VENDOR_ITERATORS = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object PoolByteStream.:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]

BAD_SIGNS = (
    "guest run got abandoned",
    "never retrieved",
    "Task was destroyed",
    "was never awaited",
    "Exception ignored",
)


def unexpected_errors(stderr: str) -> list[str]:
    """The app's logged errors, except uvicorn cancelling a request still running when its
    graceful shutdown time is over (what it does to a stream in flight, by design)."""
    return [
        block
        for block in stderr.split("ERROR:")
        if "Traceback" in block and "timeout graceful shutdown exceeded" not in block
    ]


@pytest.fixture
def _collect_garbage() -> Iterator[None]:
    """Finalize the client's abandoned iterators in the test that left them."""
    yield
    gc.collect()


async def model(request: ScriptRequest) -> Any:
    """The fake model: ``hold`` streams two events and stalls, ``slow`` never answers,
    anything else is answered (streamed in small pieces)."""
    prompt = request.messages[-1].text
    if prompt == "hold":
        return StreamReply(response=reply_text("a partial answer that stalls"), hold_after=2)
    if prompt == "slow":
        await trio.sleep_forever()
    return StreamReply(response=reply_text(f"the answer to {prompt}"), chunk_chars=4)


@attrs.define
class App:
    process: trio.Process
    url: str
    stdout: list[str] = attrs.field(factory=list)
    stderr: list[str] = attrs.field(factory=list)
    lines: trio.MemoryReceiveChannel[str] | None = None

    async def census(self, client: httpx2.AsyncClient) -> dict[str, Any]:
        reply = await client.get(f"{self.url}/census")
        reply.raise_for_status()
        result: dict[str, Any] = reply.json()
        return result

    async def wait_for_line(self, wanted: str) -> None:
        assert self.lines is not None
        async for line in self.lines:
            if line == wanted:
                return
        raise AssertionError(f"the app ended without printing {wanted!r}")


async def _pump(stream: trio.abc.ReceiveStream, into: list[str], send: Any = None) -> None:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *whole, buffer = buffer.split(b"\n")
        for raw in whole:
            line = raw.decode(errors="replace")
            into.append(line)
            if send is not None:
                await send.send(line)
    if send is not None:
        await send.aclose()


@asynccontextmanager
async def serving(
    model_url: str, *, loop: str = "asyncio", runtime: str = "lifespan"
) -> AsyncIterator[App]:
    command = [sys.executable, "-W", "error", str(APP), loop, model_url, runtime]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    send, receive = trio.open_memory_channel[str](100)
    app = App(process=process, url="", lines=receive)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None
            assert process.stderr is not None
            nursery.start_soon(_pump, process.stdout, app.stdout, send)
            nursery.start_soon(_pump, process.stderr, app.stderr)
            with trio.fail_after(STARTUP):
                async for line in receive:
                    if line.startswith("PORT "):
                        app.url = f"http://127.0.0.1:{line.split()[1]}"
                        break
                # Ready when it answers.
                async with httpx2.AsyncClient() as client:
                    while True:
                        try:
                            await app.census(client)
                            break
                        except httpx2.TransportError:
                            await trio.sleep(0.05)
            yield app
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            with trio.fail_after(STARTUP):
                await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    errors = "\n".join(app.stderr)
    for sign in BAD_SIGNS:
        assert sign not in errors, errors
    assert unexpected_errors(errors) == []


async def _stream(client: httpx2.AsyncClient, url: str, prompt: str) -> list[dict[str, Any]]:
    events = []
    async with client.stream("GET", f"{url}/chat", params={"q": prompt}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    return events


async def _first_event(chunks: AsyncIterator[bytes]) -> dict[str, Any]:
    """Read up to the first SSE event of a response's ``aiter_bytes`` (closed by the caller,
    with ``aclosing``: the line and text iterators would be left to the garbage collector)."""
    received = b""
    async for chunk in chunks:
        received += chunk
        if b"\n\n" in received:
            frame = received.split(b"\n\n", 1)[0].decode()
            event: dict[str, Any] = json.loads(frame.removeprefix("data: "))
            return event
    raise AssertionError("the stream ended before its first event")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_two_hundred_concurrent_streams_complete(loop: str) -> None:
    async with (
        open_openai_server(model) as fake,
        serving(fake.base_url, loop=loop) as app,
        httpx2.AsyncClient(
            timeout=60, limits=httpx2.Limits(max_connections=200, max_keepalive_connections=200)
        ) as client,
    ):
        assert (await app.census(client))["loop"].startswith(loop)
        results: dict[int, list[dict[str, Any]]] = {}

        async def one(index: int) -> None:
            results[index] = await _stream(client, app.url, f"question {index}")

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for index in range(200):
                    nursery.start_soon(one, index)
        for index in range(200):
            events = results[index]
            expected = f"the answer to question {index}"
            assert "".join(event.get("text", "") for event in events) == expected
            assert events[-1] == {"done": expected}
        assert len(fake.chat_requests()) == 200


@pytest.mark.usefixtures("_collect_garbage")
@VENDOR_ITERATORS[0]
@VENDOR_ITERATORS[1]
@VENDOR_ITERATORS[2]
async def test_a_client_that_disconnects_mid_stream_stops_the_turn() -> None:
    async with (
        open_openai_server(model) as fake,
        serving(fake.base_url) as app,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        # A finished request first: the pool's idle connection and any lazy setup exist.
        await _stream(client, app.url, "warm up")
        before = await app.census(client)
        async with httpx2.AsyncClient(timeout=30) as leaving:
            async with (
                leaving.stream("GET", f"{app.url}/chat", params={"q": "hold"}) as response,
                aclosing(response.aiter_bytes()) as chunks,
            ):
                await _first_event(chunks)  # the model now stalls mid-stream
                during = await app.census(client)
                assert during["trio_tasks"] > before["trio_tasks"]
                assert during["model_connections"] >= 1
            # Leaving the block closed the connection mid-stream.
        with trio.fail_after(30):
            while True:
                after = await app.census(client)
                if (
                    after["trio_tasks"] == before["trio_tasks"]
                    # The held stream's connection is closed, not pooled (an idle one
                    # from the first request may stay).
                    and after["model_connections"] == during["model_connections"] - 1
                    and after["asyncio_tasks"] == before["asyncio_tasks"]
                ):
                    break
                await trio.sleep(0.05)
        # Nothing left: no trio task, no asyncio task, no connection, no new thread.
        assert after["threads"] == before["threads"]
        assert len(fake.chat_requests()) == 2


async def test_asyncio_timeout_in_an_endpoint_cancels_the_turn() -> None:
    async with (
        open_openai_server(model) as fake,
        serving(fake.base_url) as app,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        before = await app.census(client)
        reply = await client.get(f"{app.url}/ask", params={"q": "slow", "seconds": 0.2})
        assert reply.status_code == 504
        assert reply.json() == {"timed_out": True}
        after = await app.census(client)
        # The turn had stopped when TimeoutError reached the endpoint.
        assert after["trio_tasks"] == before["trio_tasks"]
        assert after["model_connections"] == 0
        ok = await client.get(f"{app.url}/ask", params={"q": "fast", "seconds": 10})
        assert ok.json() == {"text": "the answer to fast"}


@pytest.mark.usefixtures("_collect_garbage")
@VENDOR_ITERATORS[0]
@VENDOR_ITERATORS[1]
@VENDOR_ITERATORS[2]
@pytest.mark.parametrize(
    ("loop", "runtime", "stop"),
    [
        ("asyncio", "lifespan", signal.SIGINT),
        ("uvloop", "lazy", signal.SIGINT),
        ("asyncio", "lazy", signal.SIGTERM),
    ],
)
async def test_shutdown_with_a_stream_in_flight_is_clean(
    loop: str, runtime: str, stop: signal.Signals
) -> None:
    async with (
        open_openai_server(model) as fake,
        serving(fake.base_url, loop=loop, runtime=runtime) as app,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        async with (
            client.stream("GET", f"{app.url}/chat", params={"q": "hold"}) as response,
            aclosing(response.aiter_bytes()) as chunks,
        ):
            await _first_event(chunks)
            app.process.send_signal(stop)
            with trio.fail_after(STARTUP):
                await app.wait_for_line("LIFESPAN CLOSED")
                await app.process.wait()
    # serving() checked stderr for abandoned guest runs and unretrieved errors.
    if stop == signal.SIGINT:
        assert app.process.returncode == 0
        assert app.stdout[-2:] == ["INTERRUPTED", "STOPPED"]
    else:  # uvicorn re-raises SIGTERM once it has shut down: the default action ends it
        assert app.process.returncode == -signal.SIGTERM
