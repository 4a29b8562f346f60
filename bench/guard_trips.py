"""After a guard trips, at most one more model chunk reaches the caller (issue 50's Done-when).

    .venv/bin/python bench/guard_trips.py [--points 700] [--seed 1] [--json out.json]

Runs ``points`` turns, each tripped by a guard at a random point, against a fake
OpenAI-compatible server on loopback (in a thread of its own, which paces its stream chunks
in real time and watches each connection), with the real OpenAI-compatible provider over
HTTP. Each point picks at random:

- how the turn runs: streamed or not (``stream`` / ``run``), top-level, inside an agent used
  as a tool (``nested-*``: the inner agent's guard trips, the outer turn gets the error
  in-band and goes on) or through the asyncio bridge (``asyncio-*``);
- what trips: an input guard running beside the model call, after a random delay within the
  answer's time; or an output guard when the answer's text reaches a random length (checked
  every 1 to 20 characters);
- the answer: 20 to 60 chunks, 0.5 to 2 ms apart (``--quick``: 8 to 24, 0.3 to 1 ms).

Counted for each point: the model chunks that reached the caller after the guard's check
returned ``Trip`` (a ``TextDelta`` of the tripped turn in its stream), the trio tasks left
beside the agents after the turn (the agents are long-lived, as an application's are: the
trio points run on one pair under ``trio.run``, the bridge's on one pair under
``asyncio.run``), and at the fake server whether every response the turn
started was finished or released by the client (connection closed mid-response) within 1 s
of the turn ending. After all points: sockets and threads of the process against the
baseline (trio's idle worker threads, kept for reuse, are counted apart). Exit status 1 when
a point let more than one chunk through or anything leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import threading
import time
from functools import partial
from typing import Any

import trio

import kova.asyncio
from kova import TextDelta, ToolResult
from kova.agent import AgentBuilder, InputGuard, OutputGuard, RetryConfig, Trip, TurnCompleted
from kova.errors import GuardrailTripped
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

MODES = ("stream", "run", "nested-stream", "nested-run", "asyncio-stream", "asyncio-run")


# -- the fake server ----------------------------------------------------------------------


class Server:
    """An OpenAI-compatible chat endpoint on loopback. The prompt says how to answer:
    ``CALL <spec>`` asks for a call of the tool ``helper`` with input ``<spec>``; a spec
    ``chunks=N gap=S`` streams N chunks S seconds apart (not streamed: the whole answer after
    N * S). After a tool result it answers ``done``."""

    def __init__(self) -> None:
        self.in_flight = 0  # responses started, neither finished nor released by the client
        self.released = 0  # responses the client closed mid-way
        self.connections = 0  # open connections
        self.base_url = ""
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()

        async def main() -> None:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            self.base_url = f"http://127.0.0.1:{port}/v1"
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as self._stop:
                ready.set()
                await trio.serve_listeners(self._connection, listeners)

        self._thread = threading.Thread(target=trio.run, args=(main,), name="fake server")
        self._thread.start()
        assert ready.wait(10)

    def stop(self) -> None:
        assert self._token is not None
        assert self._stop is not None
        assert self._thread is not None
        trio.from_thread.run_sync(self._stop.cancel, trio_token=self._token)
        self._thread.join(10)

    def read(self) -> tuple[int, int, int]:
        """``(in_flight, released, connections)``, read in the server's thread."""
        assert self._token is not None
        return trio.from_thread.run_sync(
            lambda: (self.in_flight, self.released, self.connections), trio_token=self._token
        )

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = bytearray()
        try:
            while True:
                request = await _read_request(stream, buffer)
                if request is None:
                    return
                if not await self._respond(stream, request, buffer):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return
        finally:
            self.connections -= 1
            await stream.aclose()

    async def _respond(
        self, stream: trio.SocketStream, body: dict[str, Any], buffer: bytearray
    ) -> bool:
        """Answer one request; ``False``: the client went away mid-response."""
        last = body["messages"][-1]
        text = last.get("content") or ""
        streamed = bool(body.get("stream"))
        if last["role"] == "tool":
            pieces, gap, call = ["done"], 0.0, None
        elif text.startswith("CALL "):
            pieces, gap, call = [], 0.0, text[5:]
        else:
            spec = dict(item.split("=") for item in text.split())
            pieces = [f"w{i} " for i in range(int(spec["chunks"]))]
            gap, call = float(spec["gap"]), None
        self.in_flight += 1
        finished = False

        async def send(scope: trio.CancelScope) -> None:
            nonlocal finished
            try:
                if streamed:
                    await _send_stream(stream, pieces, gap, call)
                else:
                    await trio.sleep(gap * len(pieces))
                    await _send_json(stream, "".join(pieces), call)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # the client closed the connection mid-response: released
            else:
                finished = True
            scope.cancel()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_for_close, stream, nursery.cancel_scope, buffer)
                nursery.start_soon(send, nursery.cancel_scope)
        finally:
            self.in_flight -= 1
            if not finished:
                self.released += 1
        return finished


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> dict[str, Any] | None:
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        rest += data
    buffer[:] = rest[length:]
    parsed: dict[str, Any] = json.loads(rest[:length])
    return parsed


async def _watch_for_close(
    stream: trio.SocketStream, scope: trio.CancelScope, buffer: bytearray
) -> None:
    """Cancel the response when the client closes the connection (it released it). What it
    reads meanwhile is kept: the client's next request, sent the moment the last byte of
    this response reached it."""
    try:
        while data := await stream.receive_some(65536):
            buffer += data
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    scope.cancel()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-trip",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    data = f"data: {json.dumps(body)}\n\n".encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _send_stream(
    stream: trio.SocketStream, pieces: list[str], gap: float, call: str | None
) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    await stream.send_all(head + _chunk({"role": "assistant", "content": ""}))
    for piece in pieces:
        await trio.sleep(gap)
        await stream.send_all(_chunk({"content": piece}))
    if call is not None:
        arguments = json.dumps({"input": call})
        tool = {"index": 0, "id": "call_1", "type": "function"}
        tool["function"] = {"name": "helper", "arguments": arguments}
        await stream.send_all(_chunk({"tool_calls": [tool]}))
    finish = "tool_calls" if call is not None else "stop"
    done = b"data: [DONE]\n\n"
    tail = _chunk({}, finish) + f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n"
    await stream.send_all(tail)


async def _send_json(stream: trio.SocketStream, text: str, call: str | None) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if call is not None:
        arguments = json.dumps({"input": call})
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "helper", "arguments": arguments},
            }
        ]
        finish = "tool_calls"
    body = json.dumps(
        {
            "id": "chatcmpl-trip",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    ).encode()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    await stream.send_all(head + body)


# -- one trip point ---------------------------------------------------------------------------


class Point:
    """One trip point's plan and what was counted."""

    def __init__(self, rng: random.Random, index: int, *, quick: bool = False) -> None:
        self.index = index
        self.mode = rng.choice(MODES)
        self.trips = rng.choice(("input", "output"))
        self.chunks = rng.randint(8, 24) if quick else rng.randint(20, 60)
        self.gap = rng.uniform(0.0003, 0.001) if quick else rng.uniform(0.0005, 0.002)
        self.delay = rng.uniform(0.0, self.chunks * self.gap * 1.1)
        self.at_chars = rng.randint(0, 3 * self.chunks)  # each chunk is "wN " (3-4 chars)
        self.every = rng.randint(1, 20)
        self.received = 0  # model chunks of the tripped turn the caller got
        self.marker: int | None = None  # ``received`` when the guard returned Trip
        self.tripped_at: float | None = None
        self.ended_at: float | None = None
        self.tasks_left = 0
        self.unreleased = 0
        self.ok = True

    @property
    def after(self) -> int:
        return 0 if self.marker is None else self.received - self.marker

    @property
    def spec(self) -> str:
        return f"chunks={self.chunks} gap={self.gap:.6f}"

    def guards(self) -> list[Any]:
        if self.trips == "input":

            async def screen(text: str) -> Trip:
                await trio.sleep(self.delay)
                return self._trip()

            return [InputGuard(screen, name="screen")]

        def tone(text: str) -> Trip | None:
            return self._trip() if len(text) >= self.at_chars else None

        return [OutputGuard(tone, every_chars=self.every, name="tone")]

    def _trip(self) -> Trip:
        if self.marker is None:
            self.marker = self.received
            self.tripped_at = time.perf_counter()
        return Trip("tripped")

    def count(self, event: object) -> None:
        nested = self.mode.startswith("nested")
        if isinstance(event, TextDelta) and bool(event.path) == nested:
            self.received += 1

    def outcome(self, error: BaseException | None, response: Any) -> None:
        """Whether the turn ended as a trip should end it."""
        if self.mode.startswith("nested"):  # the outer turn goes on: the error in-band
            self.ok = error is None and response is not None and response.text == "done"
            results = (
                [b for m in response.new_messages for b in m.content if isinstance(b, ToolResult)]
                if self.ok
                else []
            )
            self.ok = self.ok and any(r.is_error and "tripped" in r.text for r in results)
        else:
            self.ok = isinstance(error, GuardrailTripped)
        self.ok = self.ok and self.marker is not None


class Current:
    """The point being run: the long-lived inner agent's guards ask it what to do."""

    point: Point | None = None

    def input_guard(self) -> InputGuard:
        async def screen(text: str) -> Trip | None:
            point = self.point
            if point is None or point.trips != "input":
                return None
            await trio.sleep(point.delay)
            return point._trip()

        return InputGuard(screen, name="screen")

    def output_guard(self) -> OutputGuard:
        def tone(text: str) -> Trip | None:
            point = self.point
            if point is None or point.trips != "output" or len(text) < point.at_chars:
                return None
            return point._trip()

        return OutputGuard(tone, every_chars=1, name="tone")


def agents(base_url: str, current: Current) -> tuple[Any, Any]:
    """The agents every point runs (long-lived, as an application's are): one without
    guards of its own (a point passes its guards per call), and one whose tool is an agent
    with guards (asking ``current`` what to do)."""

    def provider() -> OpenAiCompatibleProvider:
        config = OpenAiConfig(model="fake", base_url=base_url, api_key="sk-fake", timeout=30)
        return OpenAiCompatibleProvider(config)

    retry = RetryConfig(max_retries=0)
    plain = AgentBuilder().provider(provider()).retry_config(retry).build()
    inner = (
        AgentBuilder()
        .provider(provider())
        .retry_config(retry)
        .guards(current.input_guard(), current.output_guard())
        .name("helper")
        .build()
    )
    outer = AgentBuilder().provider(provider()).retry_config(retry).tool(inner.as_tool())
    return plain, outer.build()


def _calls(point: Point, plain: Any, outer: Any) -> tuple[str, Any, Any]:
    """The point's prompt, and how to stream and run it."""
    if point.mode.startswith("nested"):
        return "CALL " + point.spec, outer.stream, outer.run
    guards = point.guards()
    return point.spec, partial(plain.stream, guards=guards), partial(plain.run, guards=guards)


async def _turn(point: Point, prompt: str, stream: Any, run: Any) -> None:
    error = response = None
    try:
        if point.mode.endswith("stream"):
            async with stream(prompt) as events:
                async for event in events:
                    point.count(event)
                    if isinstance(event, TurnCompleted):
                        response = event.response
        else:
            response = await run(prompt)
    except GuardrailTripped as exc:
        error = exc
    point.ended_at = time.perf_counter()
    point.outcome(error, response)


async def _settle(server: Server, point: Point) -> None:
    """Wait (up to 1 s) for the server to see every response finished or released."""
    deadline = trio.current_time() + 1.0
    while True:
        in_flight, _, _ = await trio.to_thread.run_sync(server.read)
        if in_flight == 0 or trio.current_time() > deadline:
            point.unreleased = in_flight
            return
        await trio.sleep(0.005)


def _tasks() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(c) for n in task.child_nurseries for c in n.child_tasks)

    return count(trio.lowlevel.current_root_task())


async def _count_tasks() -> int:
    await trio.lowlevel.checkpoint()
    return _tasks()


async def trio_points(server: Server, points: list[Point]) -> None:
    """The points run under trio, one after the other, on the same agents."""
    current = Current()
    plain, outer = agents(server.base_url, current)
    async with plain, outer:
        for point in points:
            current.point = point
            before = await _count_tasks()
            await _turn(point, *_calls(point, plain, outer))
            await _settle(server, point)
            await trio.sleep(0.002)  # let tasks the turn cancelled finish unwinding
            point.tasks_left = await _count_tasks() - before


def asyncio_points(server: Server, points: list[Point]) -> None:
    """The points run through the asyncio bridge, on one loop and the same agents."""

    async def main() -> None:
        current = Current()
        plain, outer = agents(server.base_url, current)
        async with (
            kova.asyncio.open_agent(plain) as bridged,
            kova.asyncio.open_agent(outer) as bridged_outer,
        ):
            runtime = kova.asyncio.current_runtime()
            assert runtime is not None
            for point in points:
                current.point = point
                before = await runtime.run(_count_tasks)
                await _turn(point, *_calls(point, bridged, bridged_outer))
                await runtime.run(_settle, server, point)
                await asyncio.sleep(0.002)
                point.tasks_left = await runtime.run(_count_tasks) - before

    asyncio.run(main())


# -- the run ----------------------------------------------------------------------------


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def _threads() -> tuple[int, int]:
    """(threads other than trio's idle worker cache, trio's worker threads)."""
    names = [thread.name for thread in threading.enumerate()]
    workers = sum(1 for name in names if name.startswith("Trio thread"))
    return len(names) - workers, workers


def run_points(count: int, seed: int, *, quick: bool = False) -> dict[str, Any]:
    server = Server()
    server.start()
    rng = random.Random(seed)
    points = [Point(rng, index, quick=quick) for index in range(count)]
    try:
        # A warm-up point, so that what stays for the process (caches) is in the baseline.
        warm = Point(random.Random(seed + 10_000), -1, quick=True)
        warm.mode = "stream"
        trio.run(trio_points, server, [warm])
        sockets, (threads, _) = _sockets(), _threads()
        started = time.perf_counter()
        trio.run(trio_points, server, [p for p in points if not p.mode.startswith("asyncio")])
        asyncio_points(server, [p for p in points if p.mode.startswith("asyncio")])
        took = time.perf_counter() - started
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and server.read()[2] > 0:
            time.sleep(0.01)  # the server closes its side once the client closed its own
        leaked_sockets = _sockets() - sockets
        other_threads, workers = _threads()
        _, released, connections = server.read()
    finally:
        server.stop()
    after = [point.after for point in points]
    waits = [
        (point.ended_at - point.tripped_at) * 1000
        for point in points
        if point.ended_at is not None and point.tripped_at is not None
    ]
    by_mode = {
        mode: {
            "points": sum(1 for p in points if p.mode == mode),
            "max_after": max((p.after for p in points if p.mode == mode), default=0),
        }
        for mode in MODES
    }
    return {
        "points": count,
        "seed": seed,
        "quick": quick,
        "seconds": round(took, 2),
        "max_chunks_after_trip": max(after),
        "chunks_after_trip": {str(n): after.count(n) for n in sorted(set(after))},
        "by_mode": by_mode,
        "by_trip": {
            kind: sum(1 for p in points if p.trips == kind) for kind in ("input", "output")
        },
        "wrong_outcome": [p.index for p in points if not p.ok],
        "tasks_left": sum(p.tasks_left for p in points),
        "responses_not_released": sum(p.unreleased for p in points),
        "responses_released_mid_way": released,
        "server_connections_open_at_end": connections,
        "sockets_leaked": leaked_sockets,
        "threads_leaked": other_threads - threads,
        "trio_idle_worker_threads": workers,
        "ms_from_trip_to_turn_end": {
            "median": round(statistics.median(waits), 3) if waits else None,
            "max": round(max(waits), 3) if waits else None,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=700)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--quick", action="store_true", help="shorter answers (8-24 chunks 0.3-1 ms apart)"
    )
    args = parser.parse_args()
    figures = run_points(args.points, args.seed, quick=args.quick)
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(figures, file, indent=2)
    bad = (
        figures["max_chunks_after_trip"] > 1
        or figures["wrong_outcome"]
        or figures["tasks_left"]
        or figures["responses_not_released"]
        or figures["sockets_leaked"] > 0
        or figures["threads_leaked"] > 0
        or figures["server_connections_open_at_end"]
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
