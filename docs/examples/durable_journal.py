"""A turn that survives its process: kill it mid-tool, run it again, nothing is done twice.

Run it: ``python docs/examples/durable_journal.py``. It runs the same turn twice, each time in
a child process: the first is killed (SIGKILL, no cleanup) while a tool runs; the second
continues the turn from the journal. The model is a script, so no key is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from kova import Message, ToolAnnotations, ToolResult
from kova.agent import AgentBuilder
from kova.durable import SqliteJournal
from kova.testing import FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

WORK = Path(os.environ.get("KOVA_EXAMPLE_DIR", "."))
RUNS = WORK / "runs.json"


def count(name: str) -> None:
    runs = json.loads(RUNS.read_text()) if RUNS.exists() else {}
    runs[name] = runs.get(name, 0) + 1
    RUNS.write_text(json.dumps(runs))


@tool
async def send_invoice(customer: str) -> str:
    """Email the customer their invoice (not idempotent: a second run sends a second email)."""
    count("send_invoice")
    return f"invoice sent to {customer}"


@tool(annotations=ToolAnnotations(read_only=True))
async def sales_report(month: str) -> str:
    """Build the month's sales report (read-only: safe to run again)."""
    count("sales_report")
    await trio.sleep(0.5)
    if os.environ.get("CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the machine lost power, say
    return f"{month}: 1,204 orders"


def model(request: ScriptRequest) -> object:
    count("model")
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
    if not results:
        return reply_tool_calls(
            ("send_invoice", {"customer": "ACME"}), ("sales_report", {"month": "May"})
        )
    return reply_text("Done: " + "; ".join(result.text for result in results))


async def child() -> None:
    agent = AgentBuilder().provider(FunctionProvider(model)).tools(send_invoice, sales_report)
    async with agent.build() as running:
        response = await running.run(
            [Message.user("Invoice ACME and give me May's sales.")],
            journal=SqliteJournal(WORK / "turns.db"),
            turn_id="invoice-acme-may",
        )
    print(response.text)


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "KOVA_EXAMPLE_DIR": work}
        first = subprocess.run(
            [sys.executable, __file__, "--child"], env={**env, "CRASH": "1"}, check=False
        )
        print(f"first run: killed (exit {first.returncode}) while the report was being built")
        second = subprocess.run(
            [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True
        )
        print(f"second run: {second.stdout.strip()}")
        print(f"runs: {json.loads((Path(work) / 'runs.json').read_text())}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        trio.run(child)
    else:
        main()
