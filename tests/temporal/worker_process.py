"""A kova Temporal worker in a process of its own, for the tests that kill one.

    python worker_process.py ADDRESS TASK_QUEUE MODEL_URL EFFECTS_DIR SLOW_SECONDS [wait]

Serves the agent ``ops`` with three tools that write what they do to files in EFFECTS_DIR:
``note`` (quick), ``report`` (annotated idempotent, slow: SLOW_SECONDS) and ``pay`` (no
annotation, slow). Each call appends ``<tool> <idempotency key>`` to ``started`` when it
begins and to ``done`` when its effect has happened. Also serves ``summing``: no tools, a
context policy that summarizes (its own provider writes the summary) when a request is over
400 tokens. Prints ``READY`` once polling; with ``wait``, prints ``LOADED`` first and polls
only once a line comes on stdin (a test starts the worker that takes over early).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

import trio
from temporalio.client import Client

import kova.temporal
from kova import ToolAnnotations
from kova.agent import AgentBuilder, RetryConfig, Summarize
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.tools import ToolContext, tool


def build(model_url: str, effects: Path, slow: float) -> AgentBuilder:
    def record(kind: str, name: str, ctx: ToolContext) -> None:
        with (effects / kind).open("a") as file:
            file.write(f"{name} {ctx.idempotency_key}\n")

    @tool
    async def note(text: str, ctx: ToolContext) -> str:
        """Write a note."""
        record("started", "note", ctx)
        record("done", "note", ctx)
        return f"noted {text}"

    @tool(annotations=ToolAnnotations(idempotent=True))
    async def report(month: str, ctx: ToolContext) -> str:
        """Build a report (idempotent: same key, same report)."""
        record("started", "report", ctx)
        await trio.sleep(slow)
        record("done", "report", ctx)
        return f"report for {month}"

    @tool
    async def pay(amount: int, ctx: ToolContext) -> str:
        """Pay an invoice."""
        record("started", "pay", ctx)
        await trio.sleep(slow)
        record("done", "pay", ctx)
        return f"paid {amount}"

    config = OpenAiConfig(base_url=model_url, model="gpt-fake", api_key="k")
    return (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=0))
        .tools(note, report, pay)
    )


def summing(model_url: str) -> AgentBuilder:
    config = OpenAiConfig(base_url=model_url, model="gpt-fake", api_key="k")
    return (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=3, initial_backoff=0.05))
        .context(Summarize(keep_last=1), window=500, reserve=100)
    )


async def main(
    address: str, queue: str, model_url: str, effects: str, slow: str, wait: str = ""
) -> None:
    if wait:
        print("LOADED", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
    client = await Client.connect(address)
    agents = {"ops": build(model_url, Path(effects), float(slow)), "summing": summing(model_url)}
    worker = kova.temporal.worker(
        client,
        task_queue=queue,
        agents=agents,
        # A dead worker's workflow tasks move to the shared queue after 1 s, not 10.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    async with worker:
        print("READY", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
