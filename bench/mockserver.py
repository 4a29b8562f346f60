"""A mock LLM server for benchmarks: OpenAI ``/v1/chat/completions``, Anthropic
``/v1/messages``, Gemini ``:generateContent`` / ``:streamGenerateContent`` (SSE) and Ollama
``/api/chat`` (NDJSON), JSON and streams, from precomputed bytes.

It runs in its own process (``python bench/mockserver.py``, prints ``PORT <n>`` when ready)
on a bare asyncio ``Protocol``: per request it parses the request head, ``json.loads`` the
small request body to read ``model``/``stream`` and whether a tool result is present, and
writes one cached ``bytes`` object. That is all the work it does, so it is never the
bottleneck; the runner measures its CPU share anyway.

``GET /hold?n=N`` makes it hold the next ``N`` chat responses until all ``N`` requests have
arrived (or 60 s passed), then send them together: the 10,000-stream scenario uses it so
that "all connections open at once" is what it measures, not a race between the first
answers and the last connects.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import payloads

_CACHE: dict[tuple[str, bool, bool, int], bytes] = {}
_NOT_FOUND = payloads.http_error(404, b'{"error":{"message":"not found","type":"not_found"}}')
_PREPARED = payloads.http_json(b"{}")
_MODELS = payloads.http_json(
    b'{"object":"list","data":[{"id":"bench-n1","object":"model","created":1,"owned_by":"b"}]}'
)


def _has_tool_result(api: str, messages: object) -> bool:
    if not isinstance(messages, list):
        return False
    for message in messages:
        if not isinstance(message, dict):
            continue
        if api == "gemini":
            parts = message.get("parts")
            if isinstance(parts, list) and any(
                isinstance(p, dict) and "functionResponse" in p for p in parts
            ):
                return True
            continue
        if api in ("openai", "ollama"):
            if message.get("role") == "tool":
                return True
            continue
        if api == "responses":
            if message.get("type") == "function_call_output":
                return True
            continue
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return True
    return False


def respond(method: bytes, path: bytes, body: bytes) -> bytes:
    path, _, query = path.partition(b"?")
    prepare = path.startswith(b"/prepare/")
    if prepare:
        # ``/prepare/v1/messages``: build the response this body would get into the cache, so
        # the first timed request does not pay for building it.
        path = path[len(b"/prepare") :]
    gemini_stream = path.endswith(b":streamGenerateContent")
    if gemini_stream or path.endswith(b":generateContent"):
        # Gemini: the model is in the path (``/v1beta/models/bench-n20:generateContent``).
        api = "gemini"
    elif path == b"/api/chat":
        api = "ollama"
    elif path.endswith(b"/chat/completions"):
        api = "openai"
    elif path.endswith(b"/responses"):
        api = "responses"
    elif path.endswith(b"/messages"):
        api = "anthropic"
    elif path.endswith(b"/models") and method == b"GET":
        return _MODELS
    elif path == b"/stats":
        return _stats_response()
    elif path == b"/hold":
        return _hold_response(query)
    else:
        return _NOT_FOUND
    try:
        request = json.loads(body)
    except ValueError:
        return payloads.http_error(400, b'{"error":{"message":"bad json","type":"invalid"}}')
    if api == "gemini":
        model = path.rsplit(b"/", 1)[1].split(b":", 1)[0].decode()
        tool, n = payloads.parse_model(model)
        tool_call = tool and not _has_tool_result(api, request.get("contents"))
        key = (api, gemini_stream, tool_call, n)
    else:
        tool, n = payloads.parse_model(str(request.get("model", "")))
        history = request.get("input" if api == "responses" else "messages")
        tool_call = tool and not _has_tool_result(api, history)
        # Ollama streams unless told not to.
        stream = request.get("stream", api == "ollama")
        key = (api, bool(stream), tool_call, n)
    response = _CACHE.get(key)
    if response is None:
        response = _CACHE[key] = payloads.build(*key)
    return _PREPARED if prepare else response


class _Stats:
    """Connections open now and the most open at once since the last ``/stats`` read."""

    open = 0
    peak = 0


def _stats_response() -> bytes:
    body = json.dumps({"open": _Stats.open, "peak": _Stats.peak}).encode()
    _Stats.peak = 0
    return payloads.http_json(body)


class _Hold:
    """Chat responses held back until ``target`` of them are waiting."""

    target = 0
    waiting: list[tuple[asyncio.Transport, bytes]] = []  # noqa: RUF012
    timer: asyncio.TimerHandle | None = None

    @classmethod
    def add(cls, transport: asyncio.Transport, response: bytes) -> None:
        cls.waiting.append((transport, response))
        if cls.timer is None:
            cls.timer = asyncio.get_running_loop().call_later(60.0, cls.release)
        if len(cls.waiting) >= cls.target:
            cls.release()

    @classmethod
    def release(cls) -> None:
        waiting, cls.waiting, cls.target = cls.waiting, [], 0
        if cls.timer is not None:
            cls.timer.cancel()
            cls.timer = None
        for transport, response in waiting:
            if not transport.is_closing():
                transport.write(response)


def _hold_response(query: bytes) -> bytes:
    _Hold.target = int(query.partition(b"=")[2] or b"0")
    return payloads.http_json(b"{}")


class _Http(asyncio.Protocol):
    __slots__ = ("_buffer", "_transport")

    def __init__(self) -> None:
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        _Stats.open += 1
        _Stats.peak = max(_Stats.peak, _Stats.open)

    def connection_lost(self, exc: Exception | None) -> None:
        _Stats.open -= 1

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        transport = self._transport
        assert transport is not None
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buffer[:end]
            length = 0
            lines = head.split(b"\r\n")
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
                    break
            if len(buffer) < end + 4 + length:
                break
            body = buffer[end + 4 : end + 4 + length]
            buffer = buffer[end + 4 + length :]
            method, path, _ = lines[0].split(b" ", 2)
            response = respond(method, path, body)
            if _Hold.target and not path.startswith((b"/hold", b"/stats", b"/prepare")):
                _Hold.add(transport, response)
            else:
                transport.write(response)
        self._buffer = buffer


async def _main(port: int) -> None:
    # One socket per connection: the 10,000-stream scenario needs more than the default.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, "127.0.0.1", port, backlog=4096)
    sock = server.sockets[0]
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
