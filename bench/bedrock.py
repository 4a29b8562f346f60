"""Bedrock ConverseStream: kova against boto3's ``converse_stream`` on the same mock, same run.

    .venv/bin/python bench/bedrock.py                  # 1000-event streams, 5 rounds
    .venv/bin/python bench/bedrock.py --events 200 --streams 5 --rounds 2   # quick

A mock Bedrock runtime runs in its own process (this file with ``--serve``): every
``POST /model/{id}/converse-stream`` gets the same precomputed answer, one HTTP chunk per
AWS event-stream message (``messageStart``, N ``contentBlockDelta`` text events,
``contentBlockStop``, ``messageStop``, ``metadata``), as the service flushes each token. Both
clients sign every request with SigV4 (the mock does not check it: this measures the clients).

Rows, each reading whole streams and counting the text events it got (events/s = text events
over wall time, medians over the rounds):

* ``kova (trio)``: ``BedrockProvider.chat_completion_stream`` on kova's transport, no thread.
* ``boto3, thread per event``: what async SDKs built on boto3 do under an event loop
  (pydantic-ai's and LangChain's Bedrock models): ``converse_stream`` in a worker thread, then
  every ``next()`` of its ``EventStream`` in a worker thread too.
* ``boto3, one thread per stream``: boto3's best case from async code: the whole call and the
  whole iteration in one worker thread (the caller sees no event until the stream ends).

The target (issue 13): kova at least 2x boto3's events/s in the thread-per-event pattern.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
KEY_ID = "AKIABENCHMARK0000001"
SECRET = "bench/secret/key/not/a/real/one/000000000"
TOKEN = "Hello"  # one text delta per event, a token's worth


# --------------------------------------------------------------------------- mock server


def _stream_response(events: int) -> bytes:
    from kova.testing._wire.bedrock import event_message

    messages = [event_message("messageStart", {"p": "abcdefgh", "role": "assistant"})]
    messages += [
        event_message(
            "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": TOKEN}, "p": "abc"}
        )
    ] * events
    messages += [
        event_message("contentBlockStop", {"contentBlockIndex": 0, "p": "abcdefg"}),
        event_message("messageStop", {"p": "abcd", "stopReason": "end_turn"}),
        event_message(
            "metadata",
            {
                "usage": {"inputTokens": 10, "outputTokens": events, "totalTokens": 10 + events},
                "metrics": {"latencyMs": 1},
                "p": "ab",
            },
        ),
    ]
    parts = [
        b"HTTP/1.1 200 OK\r\n"
        b"content-type: application/vnd.amazon.eventstream\r\n"
        b"transfer-encoding: chunked\r\n"
        b"x-amzn-requestid: 00000000-0000-4000-8000-000000000000\r\n"
        b"\r\n"
    ]
    for message in messages:
        parts += [b"%x\r\n" % len(message), message, b"\r\n"]
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


class _Http(asyncio.Protocol):
    response = b""

    def __init__(self) -> None:
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data
        assert self._transport is not None
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            head = buffer[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length :]
            self._transport.write(self.response)
        self._buffer = buffer


async def _serve(events: int) -> None:
    _Http.response = _stream_response(events)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


# --------------------------------------------------------------------------- clients


def make_kova(base_url: str) -> Any:
    from kova.providers.bedrock import BedrockConfig, BedrockProvider

    return BedrockProvider(
        BedrockConfig(
            region="us-east-1",
            model_id=MODEL,
            endpoint_url=base_url,
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
        )
    )


async def run_kova(provider: Any, streams: int) -> int:
    """``streams`` streams on an open provider (its pool made once, like boto3's client)."""
    from kova import TextDelta
    from kova.providers import ChatRequest

    request = ChatRequest.of("Tell me a story.")
    count = 0
    for _ in range(streams):
        async with provider.chat_completion_stream(request) as batches:
            async for batch in batches:
                for event in batch:
                    if type(event) is TextDelta:
                        count += 1
    return count


def _boto3_client(base_url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"total_max_attempts": 1}),
    )


_MESSAGES = [{"role": "user", "content": [{"text": "Tell me a story."}]}]
_DONE = object()


async def run_boto3_thread_per_event(client: Any, streams: int) -> int:
    import trio

    count = 0
    for _ in range(streams):
        answer = await trio.to_thread.run_sync(
            lambda: client.converse_stream(modelId=MODEL, messages=_MESSAGES)
        )
        iterator = iter(answer["stream"])
        while True:
            event = await trio.to_thread.run_sync(next, iterator, _DONE)
            if event is _DONE:
                break
            delta = event.get("contentBlockDelta")  # type: ignore[attr-defined]
            if delta is not None and "text" in delta["delta"]:
                count += 1
    return count


async def run_boto3_thread_per_stream(client: Any, streams: int) -> int:
    import trio

    def one_stream() -> int:
        answer = client.converse_stream(modelId=MODEL, messages=_MESSAGES)
        return sum(
            1
            for event in answer["stream"]
            if "text" in event.get("contentBlockDelta", {}).get("delta", {})
        )

    count = 0
    for _ in range(streams):
        count += await trio.to_thread.run_sync(one_stream)
    return count


# --------------------------------------------------------------------------- runner


def _start_server(events: int) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--events", str(events)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("PORT "):
        server.kill()
        raise RuntimeError(f"the mock server did not start: {line!r}")
    return server, f"http://127.0.0.1:{line.split()[1]}"


async def _measure(args: argparse.Namespace, base_url: str) -> dict[str, list[float]]:
    import trio

    client = await trio.to_thread.run_sync(_boto3_client, base_url)
    provider = make_kova(base_url)
    async with provider.open():
        return await _rounds(args, provider, client)


async def _rounds(args: argparse.Namespace, provider: Any, client: Any) -> dict[str, list[float]]:
    rows: dict[str, Any] = {
        "kova (trio)": lambda: run_kova(provider, args.streams),
        "boto3, thread per event": lambda: run_boto3_thread_per_event(client, args.streams),
        "boto3, one thread per stream": lambda: run_boto3_thread_per_stream(client, args.streams),
    }
    for run in rows.values():  # warm-up: imports, pools, first signatures
        await run()
    rates: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):  # interleaved, so drift hits every row alike
        for name, run in rows.items():
            start = time.perf_counter()
            count = await run()
            elapsed = time.perf_counter() - start
            expected = args.events * args.streams
            if count != expected:
                raise RuntimeError(f"{name} read {count} text events, expected {expected}")
            rates[name].append(count / elapsed)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="text events per stream")
    parser.add_argument("--streams", type=int, default=10, help="streams per round and row")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.events))
        return

    import trio

    server, base_url = _start_server(args.events)
    try:
        rates = trio.run(_measure, args, base_url)
    finally:
        server.terminate()
        server.wait()
    kova = statistics.median(rates["kova (trio)"])
    print(
        f"\nBedrock ConverseStream, {args.events} text events a stream, {args.streams} streams "
        f"a round, {args.rounds} rounds (median, min-max)\n"
    )
    print("| client | events/s | vs kova |")
    print("|---|---:|---:|")
    for name, values in rates.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median:,.0f} ({min(values):,.0f}-{max(values):,.0f}) "
            f"| {median / kova:.2f}x |"
        )
    per_event = statistics.median(rates["boto3, thread per event"])
    print(f"\nkova / boto3 thread per event: {kova / per_event:.1f}x (target: at least 2x)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "events_per_second": rates}, out, indent=2)


if __name__ == "__main__":
    main()
