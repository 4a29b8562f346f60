"""``agent.resume_sync`` (issue 44, item 11): a script that ran a turn with ``run_sync`` and
had its deferred calls decided goes on without an event loop of its own."""

from __future__ import annotations

from kova import Message, tool
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

REMOVED: list[str] = []


@tool
async def remove(path: str) -> str:
    """Remove a file."""
    REMOVED.append(path)
    return f"removed {path}"


def test_a_script_resumes_a_paused_turn_with_resume_sync() -> None:
    REMOVED.clear()
    provider = ScriptedProvider(
        [reply_tool_calls(("remove", {"path": "/tmp/a"})), reply_text("done")]
    )
    agent = AgentBuilder().provider(provider).tool(remove).defer_approvals().build()
    history = [Message.user("clean up")]
    first = agent.run_sync(history)
    assert first.pending is not None
    assert REMOVED == []
    history += first.new_messages
    second = agent.resume_sync(history, first.pending.approve(first.pending.calls[0].id))
    assert second.pending is None
    assert second.text == "done"
    assert REMOVED == ["/tmp/a"]
    assert not agent.is_open  # opened for the call and closed again, as run_sync does
