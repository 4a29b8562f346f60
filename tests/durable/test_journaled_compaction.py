"""A journaled turn killed (SIGKILL) while its summarizer is answering resumes, calls the
summarizer exactly once (counted at the fake server) and sends the same compacted history
as a turn that was never killed (issue 49)."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio

from kova import Message, ToolResult
from kova.testing import Script, open_anthropic_server, reply_text, reply_tool_calls

if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO

    from kova.testing import ScriptRequest

PROGRAM = textwrap.dedent(
    """
    import json, sys, trio
    from kova import Message
    from kova.agent import AgentBuilder, Summarize
    from kova.durable import SqliteJournal
    from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
    from kova.tools import tool

    base_url, journal_path = sys.argv[1], sys.argv[2]

    @tool
    async def read(n: int) -> str:
        \"\"\"Read a part.\"\"\"
        return f"part {n}: " + "x" * 2000

    async def main():
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-x", api_key="k", base_url=base_url)
        )
        agent = (
            AgentBuilder().provider(provider).tools(read)
            .context(Summarize(keep_last=2), window=3000)
        )
        async with agent.build() as running:
            response = await running.run(
                [Message.user("read the parts")],
                journal=SqliteJournal(journal_path),
                turn_id="turn-1",
            )
        print(json.dumps({"text": response.text, "llm_calls": response.llm_calls}))

    trio.run(main)
    """
)


class Model:
    """Six reads, then an answer; a summary request is counted and, while ``hold`` is set,
    held until the test kills the client."""

    def __init__(self) -> None:
        self.steps = 0
        self.summaries = 0
        self.hold = False  # hold the summary until killed
        self.hold_after = False  # hold the first call after the summary until killed
        self.summary_asked = trio.Event()
        self.after_summary: list[tuple[Message, ...]] = []

    async def __call__(self, request: ScriptRequest):
        last = request.messages[-1].text
        if "<conversation>" in last:
            self.summaries += 1
            if self.hold:
                self.summary_asked.set()
                await trio.sleep_forever()  # the client dies meanwhile
            return reply_text("Notes: parts 1-3 read, all x.")
        if any("Notes: parts" in m.text for m in request.messages):
            self.after_summary.append(request.messages)
            if self.hold_after:
                self.summary_asked.set()
                await trio.sleep_forever()  # the client dies meanwhile
        self.steps += 1
        if self.steps <= 6:
            return reply_tool_calls(("read", {"n": self.steps}))
        results = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
        return reply_text(f"done with {results} results in view")


def _files(tmp_path: Path, journal: str) -> tuple[BinaryIO, BinaryIO]:
    return open(tmp_path / f"{journal}.out", "wb"), open(tmp_path / f"{journal}.err", "wb")


async def _child(tmp_path: Path, base_url: str, journal: str) -> trio.Process:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    out, err = _files(tmp_path, journal)
    with out, err:  # the child has its own copies once started
        return await trio.lowlevel.open_process(
            [sys.executable, str(script), base_url, str(tmp_path / journal)],
            stdout=out,
            stderr=err,
        )


@pytest.mark.parametrize("kill", ["mid-summary", "after-summary"])
async def test_killed_mid_summary_resumes_with_one_summary_and_the_same_history(
    tmp_path: Path, kill: str
) -> None:
    # The turn never killed: what it sends after its summary.
    reference = Model()
    async with open_anthropic_server(Script(reference)) as server:
        child = await _child(tmp_path, server.base_url, "reference.db")
        assert await child.wait() == 0, (tmp_path / "reference.db.err").read_text()[-2000:]
    assert reference.summaries >= 1
    expected = json.loads((tmp_path / "reference.db.out").read_text())

    model = Model()
    model.hold = kill == "mid-summary"
    model.hold_after = kill == "after-summary"
    async with open_anthropic_server(Script(model)) as server:
        child = await _child(tmp_path, server.base_url, "j.db")
        with trio.fail_after(30):
            await model.summary_asked.wait()
        child.kill()  # SIGKILL while the summarizer is answering
        assert await child.wait() == -9
        before = model.summaries
        assert before == 1
        killed_after = list(model.after_summary)
        assert len(killed_after) == (kill == "after-summary")
        model.hold = model.hold_after = False
        child = await _child(tmp_path, server.base_url, "j.db")
        with trio.fail_after(30):
            code = await child.wait()
        assert code == 0, (tmp_path / "j.db.err").read_text()[-2000:]
    resumed = json.loads((tmp_path / "j.db.out").read_text())
    if kill == "mid-summary":
        # The resumed turn asked for its summary once (the killed one never got an answer)
        assert model.summaries - before == reference.summaries
    else:  # the summary was journaled: never asked again
        assert model.summaries - before == reference.summaries - 1
        assert model.after_summary.pop(0) == killed_after[0]
    # ... and sent exactly what the turn that was never killed sent after it.
    assert model.after_summary[0] == reference.after_summary[0]
    assert resumed["text"] == expected["text"]
