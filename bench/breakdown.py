"""Where a streamed event's CPU goes in kova, stage by stage, next to the floor.

    .venv/bin/python bench/breakdown.py [--chunks 20000] [--repeats 5] [--api gemini]

Starts the mock server and reads the same stream through successively more of kova's stack,
printing the median client CPU per event of each stage (one process, trio, after a warm-up):

- ``httpx2 aiter_bytes``: the transport alone, no parsing;
- ``floor``: the floor client (bytes split on blank lines, ``json.loads``);
- ``kova HttpStream.raw_chunks``: kova's transport wrapper, the chunks the provider reads;
- ``+ framer``: the provider codec's framer on top (SSE or NDJSON, incremental UTF-8);
- ``kova provider``: the whole provider stream (framing, ``json.loads``, kova events);
- ``kova provider actor``: the same through ``spawn_provider`` + ``ProviderRef``;
- ``kova Agent.stream``: the path users call (an agent without tools, ``TextDelta`` counted).

``--api`` is openai, anthropic, gemini or ollama. The difference between adjacent rows is
what that layer costs per event. Not part of ``run.py``: it is the tool for finding where a
miss comes from.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Any

from kova.providers import ChatRequest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trio  # noqa: E402
from clients.floor import _HEADERS, _PATH, PROMPT, Httpx2Trio, _body  # noqa: E402
from clients.kova_client import Kova, KovaActor, KovaAgent  # noqa: E402
from run import MockServer, prepare_bodies  # noqa: E402


async def _measure(fn: Any, n: int, repeats: int) -> list[float]:
    await fn()
    out = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.process_time()
        await fn()
        out.append((time.process_time() - t0) / n * 1e6)
    return out


async def _stages(base_url: str, api: str, n: int, repeats: int) -> list[tuple[str, list[float]]]:
    import httpx2
    from clients.kova_client import make_provider

    from kova.providers._http import HttpTransport

    model = f"bench-n{n}"
    path, params = _PATH[api], None
    first: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    if api == "gemini":  # the model and the method are in the path
        path, params = f"{path}{model}:streamGenerateContent", {"alt": "sse"}
        first = [{"role": "user", "parts": [{"text": PROMPT}]}]
    body = _body(api, model, first, True)
    url = base_url + path + ("?alt=sse" if params else "")
    results: list[tuple[str, list[float]]] = []

    async with httpx2.AsyncClient(headers=_HEADERS[api]) as client:

        async def raw() -> None:
            async with client.stream("POST", url, json=body) as response:
                async for _chunk in response.aiter_bytes():
                    pass

        results.append(("httpx2 aiter_bytes (no parsing)", await _measure(raw, n, repeats)))

    async with Httpx2Trio(base_url, api) as floor:

        async def floor_stream() -> None:
            await floor.stream(model)

        results.append(("floor (split + json.loads)", await _measure(floor_stream, n, repeats)))

    transport = HttpTransport(provider=api, base_url=base_url, timeout=600.0)
    async with transport.open():
        make_framer = make_provider(base_url, api).codec.framer

        async def chunks() -> None:
            async with transport.stream(
                "POST", path, json_body=body, params=params, headers=_HEADERS[api]
            ) as stream:
                async for _chunk in stream.raw_chunks():
                    pass

        async def framed() -> None:
            framer = make_framer()
            async with transport.stream(
                "POST", path, json_body=body, params=params, headers=_HEADERS[api]
            ) as stream:
                async for chunk in stream.raw_chunks():
                    framer.feed(chunk)
            framer.finish()

        results.append(("kova HttpStream.raw_chunks", await _measure(chunks, n, repeats)))
        results.append(("+ framer.feed", await _measure(framed, n, repeats)))

    stages = (
        ("kova provider", Kova),
        ("kova provider actor", KovaActor),
        ("kova Agent.stream", KovaAgent),
    )
    for label, cls in stages:
        async with cls(base_url, api) as k:

            async def provider_stream(k: Any = k) -> None:
                await k.stream(model)

            results.append((label, await _measure(provider_stream, n, repeats)))
    return results


async def _turn_stages(
    base_url: str, api: str, n: int, repeats: int
) -> list[tuple[str, list[float]]]:
    """Agent turns: the floor's hand-written loop, the same loop on kova's provider (directly
    and through a provider actor), and ``Agent.run``."""
    from clients.kova_client import make_provider
    from payloads import TOOL_RESULT

    from kova import InferenceConfig, Message, ToolDefinition, ToolResult, ToolUse
    from kova.actors import open_runtime
    from kova.agent._provider_ref import spawn_provider

    model = "bench-tool-n20"
    config = InferenceConfig(model=model, max_tokens=1024)
    tools = (
        ToolDefinition(
            name="get_weather",
            description="Weather for a city.",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
    )
    results: list[tuple[str, list[float]]] = []

    async with Httpx2Trio(base_url, api) as floor:

        async def floor_turns() -> None:
            for _ in range(n):
                await floor.turn(model)

        results.append(("floor hand-written loop", await _measure(floor_turns, n, repeats)))

    async def hand_loop(provider: Any) -> None:
        from kova import Text

        history = [Message(role="user", content=(Text(text=PROMPT),))]
        for _ in range(4):
            response = await provider.chat_completion(
                ChatRequest(messages=history, tools=tools, config=config)
            )
            calls = [b for b in response.content if isinstance(b, ToolUse)]
            if not calls:
                return
            history.append(Message(role="assistant", content=response.content))
            history.append(
                Message.tool_results(
                    [ToolResult(content=TOOL_RESULT, tool_use_id=c.id) for c in calls]
                )
            )

    provider = make_provider(base_url, api)
    async with provider.open():

        async def direct() -> None:
            for _ in range(n):
                await hand_loop(provider)

        results.append(("same loop, kova provider", await _measure(direct, n, repeats)))
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, make_provider(base_url, api))

        async def via_actor() -> None:
            for _ in range(n):
                await hand_loop(ref)

        results.append(("same loop, provider actor", await _measure(via_actor, n, repeats)))
        await ref.stop()

    async with Kova(base_url, api) as k:

        async def agent_turns() -> None:
            for _ in range(n):
                await k.turn(model)

        results.append(("kova Agent.run", await _measure(agent_turns, n, repeats)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--api", default="openai")
    parser.add_argument("--turns", type=int, default=0, help="agent-turn breakdown instead")
    args = parser.parse_args()
    import logging

    logging.disable(logging.CRITICAL)
    server = MockServer()
    try:
        if args.turns:
            size = {"answer": 20}
            server.prepare(args.api, prepare_bodies("e", size, size))
            results = trio.run(_turn_stages, server.base_url, args.api, args.turns, args.repeats)
            unit = f"{args.turns} turns, CPU us per turn"
        else:
            size = {"chunks": args.chunks}
            server.prepare(args.api, prepare_bodies("c", size, size))
            results = trio.run(_stages, server.base_url, args.api, args.chunks, args.repeats)
            unit = f"{args.chunks} chunks, CPU us per event"
    finally:
        server.close()
    print(f"{args.api} format, {unit} (median of {args.repeats})")
    print("| stage | us | min-max | delta |")
    print("|---|---:|---:|---:|")
    previous = None
    for label, values in results:
        med = statistics.median(values)
        delta = "" if previous is None else f"{med - previous:+.2f}"
        print(f"| {label} | {med:.2f} | {min(values):.2f}-{max(values):.2f} | {delta} |")
        previous = med


if __name__ == "__main__":
    main()
