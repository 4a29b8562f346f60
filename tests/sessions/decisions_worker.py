"""A process of tests/sessions/test_session_decisions.py: one agent on session "c" of a
store, whose tool ``charge`` needs a person's approval and counts its runs in a file.

    decisions_worker.py sqlite|postgres WHERE COUNTS pause
        runs "charge" on the session: it pauses for the approval; prints "paused"
    decisions_worker.py sqlite|postgres WHERE COUNTS resume [--die]
        approves the stored pending and resumes it; prints the answer, or "refused: <error>"
        (ApprovalMismatchError / SessionError). --die: the process kills itself (SIGKILL) in
        the tool, after it counted.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import trio

from kova import Secret, ToolResult
from kova.agent import AgentBuilder
from kova.errors import ApprovalMismatchError, SessionError
from kova.sessions import PostgresSessionStore, SqliteSessionStore
from kova.testing import FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

KEY = Secret("decisions-worker-key-0123456789abcdef")


async def main(kind: str, where: str, counts: str, command: str, *flags: str) -> None:
    @tool
    async def charge(amount: int) -> str:
        """Charge the card (not idempotent)."""
        with open(counts, "a") as file:  # noqa: ASYNC230 (a line, flushed before the kill)
            file.write("charged\n")
        if "--die" in flags:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"charged {amount}"

    def model(request: ScriptRequest) -> Any:
        if isinstance(request.messages[-1].content[0], ToolResult):
            return reply_text("done")
        return reply_tool_calls(("charge", {"amount": 5}))

    builder = AgentBuilder().provider(FunctionProvider(model)).tool(charge)
    builder.defer_approvals().approval_key(KEY)
    # A short hold lease: the killed process's hold on Postgres (no liveness check across
    # machines) runs out in 2 s rather than the default 30 s.
    store = (
        SqliteSessionStore(where, lease=2.0)
        if kind == "sqlite"
        else PostgresSessionStore(where, lease=2.0)
    )
    async with store, builder.build() as agent:
        session = store.session("c")
        if command == "pause":
            response = await agent.run("charge 5", session=session)
            assert response.pending is not None
            print("paused", flush=True)
            return
        pending = await session.pending()
        assert pending is not None
        try:
            response = await agent.resume(pending.approve(pending.calls[0].id), session=session)
        except (ApprovalMismatchError, SessionError) as exc:
            print(f"refused: {exc}", flush=True)
        else:
            print(response.text, flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
