"""The journal's lease lives while its runner lives (issue 42 items 4 and 6): renewed from a
task beside the step every third of the lease, so a tool that outlasts the lease keeps its
turn; a runner that lost its claim stops and says so."""

from __future__ import annotations

import itertools
import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from kova import Message
from kova.agent import AgentBuilder
from kova.durable import SqliteJournal, TurnClaimedError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

HISTORY = [Message.user("charge the card")]


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Trio's mock clock, jumping only after 50 ms of real idleness: the journal's
    operations run in worker threads (a write waits for fsync), and a clock that jumped while
    one runs (autojump_threshold=0) would make every journal write last until the next
    deadline, however far, on a busy machine."""
    return trio.testing.MockClock(autojump_threshold=0.05)


async def test_a_tool_outlasting_the_lease_three_times_keeps_its_turn(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    # The journal's clock is the test's (trio's mock clock): lease 6 s, a tool of 18 s.
    journal = SqliteJournal(tmp_path / "j.db", lease=6, clock=clock.current_time)
    started = trio.Event()
    runs = 0
    charged = trio.Event()

    @tool
    async def charge() -> str:
        """Charge the card (slow, not idempotent)."""
        nonlocal runs
        runs += 1
        started.set()
        await trio.sleep(18)
        charged.set()
        return "charged"

    provider = ScriptedProvider([reply_tool_calls(("charge", {})), reply_text("done")])
    refused: list[float] = []
    async with AgentBuilder().provider(provider).tool(charge).build() as agent:
        response = None

        async def first() -> None:
            nonlocal response
            response = await agent.run(HISTORY, journal=journal, turn_id="t")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await started.wait()
            begun = trio.current_time()
            # A second runner tries every 1.5 s for as long as the first runs its tool.
            while not charged.is_set():
                try:
                    await journal.claim("t", owner="second runner")
                except TurnClaimedError as exc:
                    assert "being run by another runner" in str(exc)  # noqa: PT017
                    refused.append(trio.current_time() - begun)
                else:
                    # Only once the tool is done (the turn then ends and releases its claim).
                    assert charged.is_set(), (
                        f"claimed {trio.current_time() - begun} s into the tool"
                    )
                    break
                await trio.sleep(1.5)
    assert response is not None
    assert response.text == "done"
    assert runs == 1
    # Refused the whole time: from the tool's start to its end at 18 s, every 1.5 s.
    assert refused[0] == 0
    assert max(refused) >= 15
    assert all(later - earlier <= 2 for earlier, later in itertools.pairwise(refused))


async def test_a_runner_that_lost_its_claim_stops_and_says_so(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    journal = SqliteJournal(tmp_path / "j.db", lease=6, clock=clock.current_time)
    started = trio.Event()
    finished = False

    @tool
    async def charge() -> str:
        """Charge the card."""
        nonlocal finished
        started.set()
        await trio.sleep(30)
        finished = True
        return "charged"

    provider = ScriptedProvider([reply_tool_calls(("charge", {})), reply_text("done")])
    async with AgentBuilder().provider(provider).tool(charge).build() as agent:
        async with trio.open_nursery() as nursery:

            async def take_over() -> None:
                await started.wait()
                await trio.sleep(1)
                # The runner stalled past its lease, say, and another took the turn over.
                with sqlite3.connect(tmp_path / "j.db") as db:
                    db.execute("UPDATE kova_turns SET owner = 'another runner' WHERE turn_id = 't'")

            nursery.start_soon(take_over)
            with pytest.raises(TurnClaimedError, match="lost its claim on turn 't'"):
                await agent.run(HISTORY, journal=journal, turn_id="t")
    # Stopped at the next renewal (a third of the lease), long before the tool would end.
    assert not finished
    assert trio.current_time() < 10
    record = await journal.load("t")
    assert record is not None
    assert record.results == {}  # it recorded nothing after losing the claim


CHILD = """
import sys, time, trio
from kova.durable import SqliteJournal

async def main():
    await SqliteJournal(sys.argv[1], lease=600).claim("t")

trio.run(main)
print("claimed", flush=True)
time.sleep(60)
"""


def _can_unshare() -> bool:
    import shutil
    import subprocess

    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    return done.returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs unshare --pid (root or user namespaces)")
async def test_a_runner_in_another_pid_namespace_keeps_its_turn(tmp_path: Path) -> None:
    """Same host name, same boot, another PID namespace (a container): its pid means
    nothing here, so its turn waits for its lease instead of being judged dead at once."""
    import os
    import subprocess
    import sys

    path = tmp_path / "j.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", CHILD]
    child = await trio.lowlevel.open_process([*command, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        said = b""
        while b"\n" not in said:
            said += await child.stdout.receive_some()
        assert said.strip() == b"claimed"
        with pytest.raises(TurnClaimedError, match="being run by another runner"):
            await SqliteJournal(path).claim("t")
    finally:
        child.kill()
        await child.wait()
        await child.stdout.aclose()  # type: ignore[union-attr]
