"""The turn journal's storage: records, claims and leases, and several processes on one file."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from functools import partial
from typing import TYPE_CHECKING

import pytest
import trio

from kova.durable import JournalError, SqliteJournal, TurnClaimedError
from kova.errors import ApprovalMismatchError, ConfigError

if TYPE_CHECKING:
    from pathlib import Path


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_turn_is_recorded_step_by_step(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "turns.db")
    assert await journal.load("t1") is None
    async with await journal.claim("t1") as claim:
        record = await journal.load("t1")
        assert record is not None
        assert (record.snapshot, record.response, dict(record.results)) == (None, None, {})
        await claim.save_snapshot('{"v": 1}')
        await claim.tool_started("call_a")
        await claim.tool_started("call_b")
        await claim.tool_finished("call_a", '{"ok": true}')
        record = await journal.load("t1")
        assert record is not None
        assert record.snapshot == '{"v": 1}'
        assert dict(record.results) == {"call_a": '{"ok": true}'}
        assert record.unfinished == {"call_b"}
        await claim.tool_started("call_a")  # started again after finishing: result kept
        await claim.finish('{"text": "done"}')
    record = await journal.load("t1")
    assert record is not None
    assert record.response == '{"text": "done"}'
    assert dict(record.results) == {"call_a": '{"ok": true}'}
    await journal.forget("t1")
    assert await journal.load("t1") is None


async def test_decisions_resume_one_turn_id_even_after_it_is_forgotten(tmp_path: Path) -> None:
    """The journal's record of used decisions (PostgresJournal: tests/sessions/
    test_postgres_journal.py, the same rules): a nonce resumes one turn id, again and again,
    never another, and forgetting the turn does not free it (a decided pause runs once)."""
    journal = SqliteJournal(tmp_path / "turns.db")
    async with await journal.claim("a") as claim:
        await claim.use_decisions("nonce-1")
        await claim.use_decisions("nonce-1")  # the same turn goes on with them
    await journal.forget("a")
    async with await journal.claim("b") as other:
        with pytest.raises(ApprovalMismatchError, match="turn 'a' of this journal"):
            await other.use_decisions("nonce-1")
        await other.use_decisions("nonce-2")


async def test_one_owner_at_a_time_and_a_late_owner_cannot_write(tmp_path: Path) -> None:
    clock = Clock()
    journal = SqliteJournal(tmp_path / "turns.db", lease=10, clock=clock)
    first = await journal.claim("t", owner="a")
    with pytest.raises(TurnClaimedError, match="being run by another runner"):
        await journal.claim("t", owner="b")
    clock.now += 5
    await first.renew()
    clock.now += 9  # 14 s after the claim, 9 after the renewal: still a's
    with pytest.raises(TurnClaimedError):
        await journal.claim("t", owner="b")
    clock.now += 2  # the lease ran out: b takes over
    second = await journal.claim("t", owner="b")
    with pytest.raises(TurnClaimedError, match="lost its claim"):
        await first.save_snapshot("{}")
    with pytest.raises(TurnClaimedError):
        await first.tool_finished("c", "{}")
    await first.release()  # a late release leaves b's claim alone
    with pytest.raises(TurnClaimedError):
        await journal.claim("t", owner="c")
    await second.save_snapshot('{"by": "b"}')
    await second.release()
    third = await journal.claim("t", owner="c")  # released: free at once
    record = await journal.load("t")
    assert record is not None
    assert record.snapshot == '{"by": "b"}'
    await third.release()


async def test_an_expired_lease_nobody_took_still_writes(tmp_path: Path) -> None:
    clock = Clock()
    journal = SqliteJournal(tmp_path / "turns.db", lease=10, clock=clock)
    claim = await journal.claim("t", owner="a")
    clock.now += 60
    await claim.save_snapshot("{}")  # late, but still the owner: the write renews the lease
    with pytest.raises(TurnClaimedError):
        await journal.claim("t", owner="b")


RACER = textwrap.dedent(
    """
    import os, sys, trio
    from pathlib import Path
    from kova.durable import SqliteJournal, TurnClaimedError

    async def main() -> None:
        folder = Path(sys.argv[2])
        journal = SqliteJournal(sys.argv[1])
        (folder / f"ready-{os.getpid()}").touch()
        while not (folder / "go").exists():  # all four claim at once, however slow to start
            await trio.sleep(0.01)
        try:
            claim = await journal.claim("race")
        except TurnClaimedError:
            (folder / f"lost-{os.getpid()}").touch()
            print("lost")
            return
        await claim.tool_started("step")
        with trio.move_on_after(20):  # hold the turn until the others have tried
            while len(list(folder.glob("lost-*"))) < 3:
                await trio.sleep(0.01)
        await claim.tool_finished("step", claim.owner)
        print("won")

    trio.run(main)
    """
)


async def test_processes_racing_on_one_turn_do_not_both_run_a_step(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    signals = tmp_path / "signals"
    signals.mkdir()
    outputs: list[str] = []

    async def race() -> None:
        result = await trio.run_process(
            [sys.executable, str(script), str(path), str(signals)],
            capture_stdout=True,
            capture_stderr=True,
        )
        outputs.append(result.stdout.decode().strip())

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(race)
        with trio.fail_after(120):
            while len(list(signals.glob("ready-*"))) < 4:  # noqa: ASYNC110 (other processes)
                await trio.sleep(0.01)
        (signals / "go").touch()
    assert sorted(outputs) == ["lost", "lost", "lost", "won"]
    record = await SqliteJournal(path).load("race")
    assert record is not None
    assert len(record.results) == 1
    assert record.unfinished == frozenset()


KILLED = textwrap.dedent(
    """
    import os, signal, sys, trio
    from kova.durable import SqliteJournal

    async def main() -> None:
        claim = await SqliteJournal(sys.argv[1]).claim("crash")
        await claim.save_snapshot('{"step": 2}')
        await claim.tool_started("done")
        await claim.tool_finished("done", '"result"')
        await claim.tool_started("running")
        os.kill(os.getpid(), signal.SIGKILL)

    trio.run(main)
    """
)


async def test_what_was_committed_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    result = await trio.run_process([sys.executable, str(script), str(path)], check=False)
    assert result.returncode == -9
    journal = SqliteJournal(path)
    record = await journal.load("crash")
    assert record is not None
    assert record.snapshot == '{"step": 2}'
    assert dict(record.results) == {"done": '"result"'}
    assert record.unfinished == {"running"}
    # Its lease is live, but its process is gone: the turn is free at once on this machine.
    claim = await journal.claim("crash")
    await claim.save_snapshot('{"step": 3}')


async def test_a_live_process_keeps_its_turn_and_a_reused_pid_is_not_it(
    tmp_path: Path,
) -> None:
    import os
    import socket

    journal = SqliteJournal(tmp_path / "turns.db")
    await journal.claim("mine")  # this process, alive
    with pytest.raises(TurnClaimedError):
        await journal.claim("mine")
    from kova.durable._journal import _boot_id, _pid_namespace

    def owner(host: str, boot: str, namespace: str, start: str) -> str:
        return "|".join((host, boot, namespace, str(os.getpid()), start, "abc"))

    here = (socket.gethostname(), _boot_id(), _pid_namespace())
    # The same pid with another start time: a process that is gone (its pid reused by us).
    await journal.claim("reused", owner=owner(*here, "1"))
    await journal.claim("reused")
    # Where liveness cannot be known, only the lease counts: another machine, another boot,
    # another PID namespace with the same host name (a container), an older owner id.
    for name, other in [
        ("remote", owner("elsewhere", *here[1:], "1")),
        ("rebooted", owner(here[0], "another-boot", here[2], "1")),
        ("container", owner(*here[:2], "4026531836999", "1")),
        ("old form", f"{socket.gethostname()}|{os.getpid()}|1|abc"),
    ]:
        await journal.claim(name, owner=other)
        with pytest.raises(TurnClaimedError):
            await journal.claim(name)


async def test_a_journal_from_a_newer_kova_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    await SqliteJournal(path).load("x")  # creates it
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE kova_journal_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(JournalError, match="newer kova"):
        await SqliteJournal(path).load("x")


async def test_bad_values_are_clear_errors(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "turns.db")
    with pytest.raises(TypeError, match="turn_id must be a str"):
        await journal.claim(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="turn_id must be 1 to 512"):
        await journal.load("")
    claim = await journal.claim("t")
    with pytest.raises(ValueError, match="lone surrogate"):
        await claim.tool_finished("c", '"\udc80"')
    with pytest.raises(TypeError, match="JSON text"):
        await claim.save_snapshot({"a": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lease must be"):
        SqliteJournal(tmp_path / "x.db", lease="1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lease must be a finite"):
        SqliteJournal(tmp_path / "x.db", lease=float("nan"))
    with pytest.raises(JournalError, match="cannot open"):
        await SqliteJournal(tmp_path / "missing" / "dir" / "x.db").load("t")


async def test_a_forgotten_turn_leaves_nothing_for_a_rerun_with_its_id(tmp_path: Path) -> None:
    """Forgetting a turn removes its tool results too: a new turn under the same id starts
    empty (the mutant that deleted only the turn's row let the rerun load old results)."""
    journal = SqliteJournal(tmp_path / "turns.db")
    async with await journal.claim("t") as claim:
        await claim.tool_started("call_1")
        await claim.tool_finished("call_1", '{"charged": 5}')
    await journal.forget("t")
    async with await journal.claim("t"):
        record = await journal.load("t")
    assert record is not None
    assert dict(record.results) == {}
    assert record.unfinished == frozenset()
    with sqlite3.connect(tmp_path / "turns.db") as db:
        assert db.execute("SELECT COUNT(*) FROM kova_tool_calls").fetchone() == (0,)


async def _finished_call(path: Path) -> SqliteJournal:
    journal = SqliteJournal(path)
    async with await journal.claim("t") as claim:
        await claim.save_snapshot("{}")
        await claim.tool_started("charge_1")
        await claim.tool_finished("charge_1", '{"charged": 5}')
    return journal


async def test_a_dropped_table_is_refused_not_read_as_work_never_done(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    await _finished_call(path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE kova_tool_calls")
    with pytest.raises(JournalError, match="lost its table kova_tool_calls"):
        await SqliteJournal(path).load("t")  # a new process opening it
    with sqlite3.connect(path) as db:  # nothing was recreated behind the refusal
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert "kova_tool_calls" not in tables


async def test_deleted_rows_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    await _finished_call(path)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM kova_tool_calls")
    with pytest.raises(
        JournalError, match="recorded 1 finished tool calls and the journal holds 0"
    ):
        await SqliteJournal(path).load("t")


async def test_a_journal_emptied_under_a_running_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    journal = await _finished_call(path)
    for suffix in ("", "-wal", "-shm"):
        file = tmp_path / f"turns.db{suffix}"
        if file.exists():
            file.write_bytes(b"")
    with pytest.raises(JournalError, match="changed under this process"):
        await journal.load("t")
    with pytest.raises(JournalError, match="changed under this process"):
        await journal.claim("t")


async def test_a_journal_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    await _finished_call(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE kova_journal_meta SET value = '1' WHERE key = 'schema'")
    with pytest.raises(JournalError, match=r"older kova \(schema 1, this kova reads 2\)"):
        await SqliteJournal(path).load("t")


async def test_an_emptied_journal_does_not_run_a_charge_again(tmp_path: Path) -> None:
    """The agent level of the above: a journaled turn recorded its charge, then was
    interrupted; its journal is emptied under the process; running the turn again is
    refused, and the charge does not run twice."""
    from kova import Message
    from kova.agent import AgentBuilder
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    charges = 0
    recorded = trio.Event()

    @tool
    async def charge() -> str:
        """Charge the card (not idempotent)."""
        nonlocal charges
        charges += 1
        return "charged"

    @tool
    async def wait() -> str:
        """Something slow."""
        recorded.set()
        await trio.sleep_forever()

    model = ScriptedProvider(
        [reply_tool_calls(("charge", {})), reply_tool_calls(("wait", {})), reply_text("done")]
    )
    journal = SqliteJournal(tmp_path / "turns.db")
    history = [Message.user("charge once")]
    async with AgentBuilder().provider(model).tools(charge, wait).build() as agent:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(agent.run, history, journal=journal, turn_id="t"))
            await recorded.wait()
            nursery.cancel_scope.cancel()
        for suffix in ("", "-wal", "-shm"):
            file = tmp_path / f"turns.db{suffix}"
            if file.exists():
                file.write_bytes(b"")
        with pytest.raises(JournalError, match="changed under this process"):
            await agent.run(history, journal=journal, turn_id="t")
    assert charges == 1
