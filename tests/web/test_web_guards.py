"""Guards on the web view (issue 50): a relayed turn's guard verdicts are notes on the page,
and a trip ends the turn failed there."""

from __future__ import annotations

import pytest

from kova import Message
from kova.agent import AgentBuilder, Deny, InputGuard, ToolGuard, Trip
from kova.errors import GuardrailTripped
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool
from kova.web import open_event_server

from ._client import open_page


@tool
def remove(path: str) -> str:
    """Remove a file."""
    return "removed"


async def test_guard_verdicts_are_notes_and_a_trip_fails_the_turn() -> None:
    provider = ScriptedProvider(
        [
            StreamReply(response=reply_tool_calls(("remove", {"path": "/etc"})), chunk_chars=4),
            StreamReply(response=reply_text("I may not."), chunk_chars=4),
            reply_text("never sent"),
        ]
    )
    guards = (
        InputGuard(lambda text: Trip("no secrets") if "secret" in text else None, name="topic"),
        ToolGuard(lambda call: Deny("system path"), name="paths"),
    )
    agent = AgentBuilder().provider(provider).tool(remove).guards(*guards).build()
    async with open_event_server() as server, open_page(server) as page, agent:
        async with agent.stream([Message.user("clean up")]) as events:
            async for _ in server.relay(events, prompt="clean up"):
                pass
        await page.wait_for("turn_completed")
        with pytest.raises(GuardrailTripped):
            async with agent.stream([Message.user("the secret")]) as events:
                async for _ in server.relay(events, prompt="the secret"):
                    pass
        failed = await page.wait_for("turn_failed")
    notes = [event["text"] for event in page.of_type("note")]
    assert "tool guard paths denied a call: system path" in notes
    assert "input guard topic passed" in notes
    assert "input guard topic stopped the turn: no secrets" in notes
    assert failed["error"].startswith("GuardrailTripped: ")
    assert "no secrets" in failed["error"]
