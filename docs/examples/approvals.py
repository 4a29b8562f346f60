"""A tool approval that comes back the next day, in another process.

1. A request starts a turn. Deleting files needs a person, so the agent defers those calls:
   the read-only call runs, then the turn ends with ``response.pending``. The process stores
   the history and ``pending.to_json()`` (signed with the agent's approval key; here in
   files, a database row in a web backend) and exits.
2. Later, a person decides on a web page: approve one deletion, deny the other. Only the
   stored JSON is needed for that.
3. Another process resumes the turn from what was stored: the call that already ran is not
   run again, the approved one runs, the denied one is reported to the model, and the turn
   finishes.

The model is scripted (kova.testing), so this runs offline: python docs/examples/approvals.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from kova import Message, Secret, ToolAnnotations, messages_from_json, messages_to_json
from kova.agent import Agent, AgentBuilder, PendingApprovals
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from kova.providers import ModelResponse

FILES = {"/tmp/report.txt", "/tmp/notes.txt"}


@tool(annotations=ToolAnnotations(read_only=True))
def list_files(folder: str) -> str:
    """List the files in a folder."""
    return ", ".join(sorted(FILES))


@tool(annotations=ToolAnnotations(destructive=True))
def delete_file(path: str) -> str:
    """Delete a file."""
    print(f"  (deleting {path})")
    return f"deleted {path}"


SCRIPT = [
    reply_tool_calls(
        ("list_files", {"folder": "/tmp"}),
        ("delete_file", {"path": "/tmp/report.txt"}),
        ("delete_file", {"path": "/tmp/notes.txt"}),
        text="Let me look, then clean up.",
    ),
    reply_text("I deleted /tmp/report.txt; /tmp/notes.txt stays, as you asked."),
]


# Both processes sign and check the stored decisions with the same key (in production: a
# secret from your secret store, or the KOVA_APPROVAL_KEY environment variable).
KEY = Secret(os.environ.get("EXAMPLE_APPROVAL_KEY", "an example key, never use it for real"))


def agent(replies: list[ModelResponse]) -> Agent:
    # defer_approvals(): every tool not annotated read-only waits for a person.
    # approval_key(): the pending JSON is signed, so a changed one is refused on resume.
    return (
        AgentBuilder()
        .provider(ScriptedProvider(replies))
        .tools(list_files, delete_file)
        .defer_approvals()
        .approval_key(KEY)
        .build()
    )


async def start_turn(folder: Path) -> None:
    """Process 1: the turn runs until it needs a person, then everything is stored."""
    history = [Message.user("Clean up /tmp, please.")]
    async with agent(SCRIPT) as running:
        response = await running.run(history)
    assert response.pending is not None
    (folder / "history.json").write_text(messages_to_json([*history, *response.new_messages]))
    (folder / "pending.json").write_text(response.pending.to_json())
    for call in response.pending.calls:
        print(f"  waiting for a decision: {call.name}({call.arguments}) [{call.id}]")


def person_decides(folder: Path) -> None:
    """The next day, a web page: show the calls, store the decisions."""
    pending = PendingApprovals.from_json((folder / "pending.json").read_text())
    first, second = pending.calls
    pending = pending.approve(first.id).deny(second.id, "keep my notes")
    (folder / "pending.json").write_text(pending.to_json())
    print(f"  approved {first.id}, denied {second.id}")


async def resume_turn(folder: Path) -> None:
    """Process 2: the turn goes on from what was stored."""
    history = messages_from_json((folder / "history.json").read_text())
    pending = PendingApprovals.from_json((folder / "pending.json").read_text())
    async with agent(SCRIPT[1:]) as running:  # this process's model picks up from here
        response = await running.resume(history, pending)
    history.extend(response.new_messages)  # history is now the whole turn
    print(f"  answer: {response.text}")
    print(f"  the turn has {len(history)} messages")


def main() -> None:
    if len(sys.argv) == 3:  # one step, in a process of its own
        step, folder = sys.argv[1], Path(sys.argv[2])
        trio.run(start_turn if step == "start" else resume_turn, folder)
        return
    with tempfile.TemporaryDirectory() as tmp:
        print("process 1:")
        subprocess.run([sys.executable, __file__, "start", tmp], check=True)
        print("a person:")
        person_decides(Path(tmp))
        print("process 2:")
        subprocess.run([sys.executable, __file__, "resume", tmp], check=True)


if __name__ == "__main__":
    main()
