"""An MCP server written by hand that answers with what a well-behaved server never sends,
the same answers over all three transports, so a test can check that kova treats each the
same whatever carried it::

    python tests/mcp/hostile_server.py stdio
    python tests/mcp/hostile_server.py http [--json]   # Streamable HTTP, SSE (or JSON) answers
    python tests/mcp/hostile_server.py sse             # the legacy HTTP+SSE transport

The HTTP modes bind 127.0.0.1 port 0 and print ``PORT <n>`` once listening.

Tools: ``deep`` (a result nested ``depth`` levels deep), ``surrogate`` (a lone surrogate
escape, half an emoji), ``bad_utf8`` (a byte that is not UTF-8 inside a string), ``envelope``
(neither result nor error), ``big`` (a text of ``size`` bytes; ``big_id_last`` the same with
the id written last, as TypeScript servers order it; ``slow_id_last`` the same, stopping for
``pause`` seconds once ``size`` bytes are out, before the rest and the id), ``echo``, ``runs``
(how many times each tool ran, to see that nothing was sent twice), ``pid``, and
``die_later`` (stdio: stops reading, then kills itself with SIGKILL after ``seconds``,
answering nothing).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import Counter

TOOLS = (
    "deep",
    "surrogate",
    "bad_utf8",
    "envelope",
    "big",
    "big_id_last",
    "echo",
    "runs",
    "pid",
    "die_later",
    "no_newline",
    "slow_id_last",
)
RUNS: Counter[str] = Counter()


class Slow:
    """An answer sent in two parts, ``pause`` seconds apart."""

    def __init__(self, first: bytes, pause: float, rest: bytes) -> None:
        self.first = first
        self.pause = pause
        self.rest = rest


def _result(request_id: object, result: bytes) -> bytes:
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
    return head + b',"result":' + result + b"}"


def _text(text: bytes) -> bytes:
    return b'{"content":[{"type":"text","text":"' + text + b'"}]}'


def answer(message: dict[str, object]) -> bytes | Slow | None:
    """The answer to one message (``None`` for a notification), one line of JSON (bytes)."""
    request_id, method = message.get("id"), message.get("method")
    if request_id is None or method is None:
        return None
    params: dict[str, object] = message.get("params") or {}  # type: ignore[assignment]
    if method == "initialize":
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
        return _result(request_id, json.dumps(result).encode())
    if method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        return _result(request_id, json.dumps({"tools": tools}).encode())
    if method == "resources/list":
        return _result(request_id, b'{"resources":[]}')
    if method != "tools/call":
        return _result(request_id, b"{}")
    name = str(params["name"])
    arguments: dict[str, object] = params.get("arguments") or {}  # type: ignore[assignment]
    RUNS[name] += 1
    if name == "deep":
        depth = int(arguments.get("depth", 10_000))  # type: ignore[call-overload]
        deep = b"[" * depth + b"]" * depth
        return _result(request_id, b'{"content":[],"structuredContent":{"a":' + deep + b"}}")
    if name == "surrogate":
        return _result(request_id, _text(b"half \\ud83d"))
    if name == "bad_utf8":
        return _result(request_id, _text(b"bad \xff byte"))
    if name == "envelope":
        return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b"}"
    if name == "big":
        return _result(request_id, _text(b"x" * int(arguments["size"])))  # type: ignore[call-overload]
    if name == "big_id_last":  # the member order of TypeScript servers: the id comes last
        text = _text(b"x" * int(arguments["size"]))  # type: ignore[call-overload]
        return (
            b'{"result":'
            + text
            + b',"jsonrpc":"2.0","id":'
            + json.dumps(request_id).encode()
            + b"}"
        )
    if name == "slow_id_last":  # the id last, and the message unfinished for a while
        first = b'{"result":{"content":[{"type":"text","text":"' + b"x" * int(arguments["size"])  # type: ignore[call-overload]
        rest = b'"}]},"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b"}"
        return Slow(first, float(arguments["pause"]), rest)  # type: ignore[arg-type]
    if name == "no_newline":  # stdio: a huge answer whose line never ends; then silence
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b","
        if arguments.get("id_last"):  # TypeScript servers' order: the id would come last
            head = b"{"
        sys.stdout.buffer.write(head + b'"result":{"content":[{"type":"text","text":"')
        chunk = b"x" * (1 << 20)
        for _ in range(int(arguments.get("mib", 200))):  # type: ignore[call-overload]
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        time.sleep(3600)
    if name == "pid":
        return _result(request_id, _text(str(os.getpid()).encode()))
    if name == "die_later":  # stop reading stdin, then die by SIGKILL without answering
        time.sleep(float(arguments.get("seconds", 1.0)))  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGKILL)
    if name == "runs":
        return _result(request_id, _text(json.dumps(dict(RUNS)).replace('"', "'").encode()))
    echoed = json.dumps(arguments, ensure_ascii=True).replace("\\", "\\\\").replace('"', '\\"')
    return _result(request_id, _text(echoed.encode()))


def serve_stdio() -> None:
    for line in sys.stdin.buffer:
        reply = answer(json.loads(line))
        if isinstance(reply, Slow):
            sys.stdout.buffer.write(reply.first)
            sys.stdout.buffer.flush()
            time.sleep(reply.pause)
            reply = reply.rest
        if reply is not None:
            sys.stdout.buffer.write(reply + b"\n")
            sys.stdout.buffer.flush()


def _event(data: bytes) -> bytes:
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"


async def _write(writer: asyncio.StreamWriter, body: bytes | Slow, framed: bool) -> None:
    """``body`` (as an event if ``framed``), a Slow one in its two parts."""
    if not isinstance(body, Slow):
        writer.write(_event(body) if framed else body)
        await writer.drain()
        return
    writer.write(b"event: message\r\ndata: " + body.first if framed else body.first)
    await writer.drain()
    await asyncio.sleep(body.pause)
    writer.write(body.rest + b"\r\n\r\n" if framed else body.rest)
    await writer.drain()


def _length(body: bytes | Slow, framed: bool) -> int:
    size = len(body) if isinstance(body, bytes) else len(body.first) + len(body.rest)
    return size + (len(_event(b"")) if framed else 0)


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, target, headers, body


async def _respond(
    writer: asyncio.StreamWriter, status: str, body: bytes = b"", headers: str = ""
) -> None:
    writer.write(
        f"HTTP/1.1 {status}\r\ncontent-length: {len(body)}\r\n{headers}\r\n".encode() + body
    )
    await writer.drain()


class HttpServer:
    def __init__(self, mode: str, json_answers: bool) -> None:
        self.mode = mode
        self.json_answers = json_answers
        self.streams: list[asyncio.Queue[bytes | Slow]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                if not await self.route(writer, *request):
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def route(
        self,
        writer: asyncio.StreamWriter,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
    ) -> bool:
        if self.mode == "sse" and method == "GET":
            await self.event_stream(writer)
            return False
        if method == "GET":
            await _respond(writer, "405 Method Not Allowed")
            return True
        if method == "DELETE":
            await _respond(writer, "200 OK")
            return True
        reply = answer(json.loads(body))
        if self.mode == "sse":
            await _respond(writer, "202 Accepted")
            if reply is not None:
                for stream in self.streams:
                    stream.put_nowait(reply)
            return True
        if reply is None:
            await _respond(writer, "202 Accepted")
            return True
        framed = not self.json_answers
        kind = "text/event-stream" if framed else "application/json"
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-length: {_length(reply, framed)}\r\n"
            f"content-type: {kind}\r\nmcp-session-id: hostile-1\r\n\r\n".encode()
        )
        await _write(writer, reply, framed)
        return True

    async def event_stream(self, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[bytes | Slow] = asyncio.Queue()
        self.streams.append(queue)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-store\r\n"
            b"connection: close\r\n\r\nevent: endpoint\r\ndata: /messages?session_id=1\r\n\r\n"
        )
        try:
            await writer.drain()
            while True:
                await _write(writer, await queue.get(), framed=True)
        finally:
            self.streams.remove(queue)


async def serve_http(mode: str, json_answers: bool) -> None:
    server = HttpServer(mode, json_answers)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, limit=2**26)
    port = listener.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    async with listener:
        await listener.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        serve_stdio()
    else:
        asyncio.run(serve_http(sys.argv[1], "--json" in sys.argv))
