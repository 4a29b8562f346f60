"""What serving an agent costs: streamed turns through ``kova.serve.app``'s
``/v1/chat/completions`` (Hypercorn's trio worker) against ``Agent.stream`` directly.

    .venv/bin/python bench/serve.py [--clients 1000] [--chunks 50] [--direct-streams 1000]
                                    [--json out.json]

Each side runs in a child process of its own with kova's fake OpenAI server (kova.testing) on
loopback as the model, so the two differ only by the serving:

- ``direct``: ``--direct-streams`` concurrent ``Agent.stream`` turns of ``--chunks`` text
  chunks each;
- ``served``: the same agent behind the app; this process opens ``--clients`` concurrent
  streamed chat completions (httpx2) and reads them to ``[DONE]``.

Reports whether every client completed (with every chunk), the wall time, and the CPU time
of the process that ran the agent (and, served, the app) per streamed event on each side:
their difference is what the ASGI app, Hypercorn and the SSE encoding cost per event.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from typing import Any

import httpx2
import trio

CHUNK_CHARS = 4


def _answer(chunks: int) -> str:
    return ("word" * chunks)[: chunks * CHUNK_CHARS]


async def _open_agent(chunks: int, stack: Any) -> Any:
    from kova.agent import AgentBuilder
    from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
    from kova.testing import StreamReply, open_openai_server, reply_text

    def model(request: Any) -> Any:
        return StreamReply(response=reply_text(_answer(chunks)), chunk_chars=CHUNK_CHARS)

    fake = await stack.enter_async_context(open_openai_server(model))
    provider = OpenAiCompatibleProvider(
        # A long timeout: with a thousand streams at once the fake model, in the same process,
        # is slow to answer on a busy machine; the bench measures the serving, not that.
        OpenAiConfig(base_url=fake.base_url, model="m", api_key="k", timeout=600)
    )
    agent = AgentBuilder().provider(provider).name("bench").build()
    return await stack.enter_async_context(agent)


async def _child_direct(streams: int, chunks: int) -> None:
    from contextlib import AsyncExitStack

    from kova import TextDelta

    async with AsyncExitStack() as stack:
        agent = await _open_agent(chunks, stack)
        counts: list[int] = []

        async def one() -> None:
            seen = 0
            async with agent.stream("go") as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        seen += 1
            counts.append(seen)

        cpu, wall = time.process_time(), time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(streams):
                nursery.start_soon(one)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"events": sum(counts), "done": len(counts), "cpu": cpu, "wall": wall}))


async def _child_served(chunks: int) -> None:
    from contextlib import AsyncExitStack

    from hypercorn.config import Config
    from hypercorn.trio import serve

    import kova.serve

    async with AsyncExitStack() as stack:
        agent = await _open_agent(chunks, stack)
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = None
        config.errorlog = None
        config.backlog = 2048
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            app: Any = kova.serve.app(agent)
            binds = await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait))
            print(json.dumps({"url": binds[0]}), flush=True)
            start = await trio.to_thread.run_sync(sys.stdin.readline)
            assert start.strip() == "start"
            cpu = time.process_time()
            await trio.to_thread.run_sync(sys.stdin.readline)
            print(json.dumps({"cpu": time.process_time() - cpu}), flush=True)
            stop.set()


def _child(argv: list[str]) -> None:
    mode, count, chunks = argv[0], int(argv[1]), int(argv[2])
    if mode == "direct":
        trio.run(_child_direct, count, chunks)
    else:
        trio.run(_child_served, chunks)


async def _clients(url: str, clients: int, chunks: int) -> dict[str, Any]:
    body = {"model": "bench", "messages": [{"role": "user", "content": "go"}], "stream": True}
    complete = 0
    events = 0
    errors: dict[str, int] = {}
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx2.AsyncClient(limits=limits, timeout=600) as client:

        async def one() -> None:
            nonlocal complete, events
            seen = 0
            done = False
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as reply:
                async for line in reply.aiter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif (
                        line.startswith("data: ") and '"content":"' in line and '"role"' not in line
                    ):
                        seen += 1
                    elif line.startswith('data: {"error"'):
                        message = json.loads(line[6:])["error"]["message"][:120]
                        errors[message] = errors.get(message, 0) + 1
            events += seen
            if done and seen == chunks:
                complete += 1

        wall = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(clients):
                nursery.start_soon(one)
        wall = time.perf_counter() - wall
    return {"complete": complete, "events": events, "wall": wall, "errors": errors}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--direct-streams", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    direct_streams = args.direct_streams or args.clients
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    me = os.path.abspath(__file__)

    direct_run = subprocess.run(
        [sys.executable, me, "--child", "direct", str(direct_streams), str(args.chunks)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    direct = json.loads(direct_run.stdout.strip().splitlines()[-1])

    child = subprocess.Popen(
        [sys.executable, me, "--child", "served", "0", str(args.chunks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    url = json.loads(child.stdout.readline())["url"]
    child.stdin.write("start\n")
    child.stdin.flush()
    served = trio.run(_clients, url, args.clients, args.chunks)
    child.stdin.write("stop\n")
    child.stdin.flush()
    served["cpu"] = json.loads(child.stdout.readline())["cpu"]
    child.wait(timeout=60)

    direct_per = direct["cpu"] / max(direct["events"], 1) * 1e6
    served_per = served["cpu"] / max(served["events"], 1) * 1e6
    figures = {
        "clients": args.clients,
        "chunks": args.chunks,
        "direct": direct,
        "served": served,
        "direct_cpu_us_per_event": direct_per,
        "served_cpu_us_per_event": served_per,
        "serving_cpu_us_per_event": served_per - direct_per,
    }
    print(
        f"served: {served['complete']}/{args.clients} streamed clients complete, "
        f"{served['events']} events in {served['wall']:.2f} s"
    )
    print(
        f"direct Agent.stream: {direct['done']}/{direct_streams} streams, "
        f"{direct['events']} events in {direct['wall']:.2f} s"
    )
    print(
        f"CPU per streamed event: direct {direct_per:.1f} us, served {served_per:.1f} us "
        f"(serving adds {served_per - direct_per:.1f} us, {served_per / direct_per:.2f}x)"
    )
    for message, count in served["errors"].items():
        print(f"  {count} streams failed: {message}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"figures": figures}, out, indent=2)
    if served["complete"] != args.clients:
        sys.exit(1)


if __name__ == "__main__":
    main()
