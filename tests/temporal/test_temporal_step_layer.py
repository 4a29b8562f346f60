"""What the turn core and the step layer do by themselves, on Temporal (a real dev server):
deferred tools found with ``search_tools`` (answered in the workflow), the agent's context
policy, and its guards."""

from __future__ import annotations

from typing import Any

from temporal_helpers import builder, fake_openai, run, unique
from temporalio.client import Client

import kova.temporal
from kova.testing import ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

SENT: list[str] = []


@tool
def lookup(word: str) -> str:
    """Look a word up in the dictionary."""
    return f"{word}: a word"


@tool(defer=True)
def send_email(to: str, body: str) -> str:
    """Send an email message to someone."""
    SENT.append(to)
    return "sent"


@tool(defer=True)
def create_event(title: str) -> str:
    """Create a calendar event."""
    return "created"


@tool(defer=True)
def delete_event(title: str) -> str:
    """Delete a calendar event."""
    return "deleted"


def test_deferred_tools_are_offered_only_once_found(temporal_address: str) -> None:
    offered: list[list[str]] = []
    SENT.clear()

    def script(request: ScriptRequest) -> Any:
        offered.append([definition.name for definition in request.tools])
        step = len(offered)
        if step == 1:
            return reply_tool_calls(("search_tools", {"query": "email someone", "limit": 1}))
        if step == 2:
            return reply_tool_calls(("send_email", {"to": "ada@example.com", "body": "hi"}))
        return reply_text("done")

    with fake_openai(script) as url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("search")
            agents = {"clerk": builder(url, lookup, send_email, create_event, delete_event)}
            async with kova.temporal.worker(client, task_queue=queue, agents=agents):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="clerk",
                    history="Email Ada",
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                response = await kova.temporal.response(handle)
                seen = [
                    (event.kind, event.call.name if event.call else "")
                    async for event in kova.temporal.events(handle)
                    if event.kind != "text"
                ]
                return response, seen

        response, seen = run(main)
    assert response.text == "done"
    # The search was answered in the workflow (no model or tool activity for it); the
    # tool it found is offered after the up-front ones from the next call on, and ran.
    assert offered == [
        ["lookup", "search_tools"],
        ["lookup", "search_tools", "send_email"],
        ["lookup", "search_tools", "send_email"],
    ]
    assert SENT == ["ada@example.com"]
    search = response.new_messages[1].content[0]
    assert "send_email" in search.text
    assert seen == [
        ("tool_started", "search_tools"),
        ("tool_finished", "search_tools"),
        ("tool_started", "send_email"),
        ("tool_finished", "send_email"),
    ]
