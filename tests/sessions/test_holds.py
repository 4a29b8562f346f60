"""Waiting for a busy session: a turn on a session held by another (task, process, machine)
waits its turn, first come first served, up to its timeout, or fails at once with
``wait=False``; a holder's lease is renewed while it lives and frees the session when it
dies. In one process on trio's mock clock (the SQLite store's leases measured by it), and in
real processes on both stores."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kova import Message
from kova.errors import SessionBusyError
from kova.sessions import SqliteSessionStore

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("hold_worker.py")


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Trio's mock clock, jumping after 50 ms of real idleness (the store's operations run
    in worker threads: a clock that jumped during one would skip to the next deadline)."""
    return trio.testing.MockClock(autojump_threshold=0.05)


def _texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


async def _holds(path: Path) -> list[tuple[str, float]]:
    def read() -> list[tuple[str, float]]:
        with sqlite3.connect(path) as connection:
            return connection.execute(
                "SELECT owner, lease_until FROM kova_session_holds ORDER BY ticket"
            ).fetchall()

    return await trio.to_thread.run_sync(read)


async def test_waiting_turns_go_first_come_first_served(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    store = SqliteSessionStore(tmp_path / "s.db", clock=clock.current_time)
    session = store.session("c")
    done: list[tuple[str, float]] = []

    async def turn(name: str) -> None:
        await session.append([Message.user(name)])
        done.append((name, trio.current_time()))

    async with store, trio.open_nursery() as nursery:
        async with session._gate():  # the first turn: holds the session for 10 s
            for name in ("b", "c", "d", "e"):
                nursery.start_soon(turn, name)
                await trio.sleep(1)  # each arrives after the one before
            await trio.sleep(6)
            assert done == []
            assert len(await _holds(tmp_path / "s.db")) == 5  # the holder and four waiting
    assert [name for name, _ in done] == ["b", "c", "d", "e"]
    assert done[0][1] == pytest.approx(10, abs=0.2)
    assert _texts(await session.load()) == ["b", "c", "d", "e"]
    assert await _holds(tmp_path / "s.db") == []


async def test_wait_false_fails_at_once_and_a_timeout_after_it(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    store = SqliteSessionStore(tmp_path / "s.db", clock=clock.current_time, wait_timeout=60)
    async with store:
        async with store.session("c")._gate():
            begun = trio.current_time()
            with pytest.raises(SessionBusyError, match="another turn is running"):
                await store.session("c", wait=False).append([Message.user("x")])
            assert trio.current_time() - begun < 0.2
            with pytest.raises(SessionBusyError, match=r"the whole 5 s this turn waited"):
                await store.session("c", timeout=5).append([Message.user("x")])
            assert trio.current_time() - begun == pytest.approx(5, abs=0.2)
            # The store's default (wait_timeout=60).
            with pytest.raises(SessionBusyError, match=r"the whole 60 s"):
                await store.session("c").append([Message.user("x")])
            assert trio.current_time() - begun == pytest.approx(65, abs=0.4)
            assert len(await _holds(tmp_path / "s.db")) == 1  # the waiters' tickets are gone
            # Another session is not busy.
            await store.session("other", wait=False).append([Message.user("y")])
        assert await store.session("c").load() == []
        await store.session("c", wait=False).append([Message.user("z")])
        assert _texts(await store.session("c").load()) == ["z"]


async def test_a_holder_keeps_its_session_past_its_lease_while_it_lives(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    # Lease 0.6 s; the holder holds for 4 s: renewed every 0.2 s, it keeps the session from
    # a waiter of another store object (which looks at the queue every 0.1 s).
    store = SqliteSessionStore(tmp_path / "s.db", clock=clock.current_time, lease=0.6)
    other = SqliteSessionStore(tmp_path / "s.db", clock=clock.current_time, lease=0.6)
    got: list[float] = []

    async def second() -> None:
        await other.session("c").append([Message.user("second")])
        got.append(trio.current_time())

    async with store, other, trio.open_nursery() as nursery:
        async with store.session("c")._gate():
            nursery.start_soon(second)
            await trio.sleep(4)
            await store.write("c", _first_write())
    assert got == [pytest.approx(4, abs=0.3)]
    assert _texts(await store.session("c").load()) == ["first", "second"]


async def test_a_holder_that_died_elsewhere_frees_the_session_when_its_lease_runs_out(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, clock=clock.current_time, lease=3)
    async with store:
        await store.session("warm").append([Message.user("x")])  # makes the tables
        # A ticket of a process on another machine that died holding the session.
        with sqlite3.connect(path) as connection:
            connection.execute(
                "INSERT INTO kova_session_holds (session_id, owner, lease_until) "
                "VALUES ('c', 'elsewhere|b|n|1|2|x', ?)",
                (clock.current_time() + 3,),
            )
        begun = trio.current_time()
        await store.session("c").append([Message.user("after")])
        assert trio.current_time() - begun == pytest.approx(3, abs=0.2)


async def test_a_holder_of_this_machine_that_is_gone_frees_the_session_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.session("warm").append([Message.user("x")])
        dead = await trio.lowlevel.open_process([sys.executable, "-c", "pass"])
        await dead.wait()
        owner = _owner_of(dead.pid)
        with sqlite3.connect(path) as connection:
            connection.execute(
                "INSERT INTO kova_session_holds (session_id, owner, lease_until) "
                "VALUES ('c', ?, ?)",
                (owner, time.time() + 600),
            )
        with trio.fail_after(5):
            await store.session("c", wait=False).append([Message.user("after")])


def _owner_of(pid: int) -> str:
    """An owner id for ``pid`` as a process of this machine would have written it (with a
    start time no live process has)."""
    from kova.durable._journal import _process_owner

    parts = _process_owner().split("|")
    parts[3], parts[4] = str(pid), "1"
    return "|".join(parts)


def _first_write() -> Any:
    from kova.sessions import SessionWrite

    return SessionWrite(version=0, keep=0, messages=(Message.user("first"),), turn=1)


# -- across processes -------------------------------------------------------------------------


def _store_args(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[str]:
    if kind == "sqlite":
        return ["sqlite", str(tmp_path / "s.db")]
    return ["postgres", request.getfixturevalue("postgres_db")]


@pytest.fixture
def started() -> Any:
    """Start worker processes; each is ended (if it still runs) and its pipes closed."""
    processes: list[subprocess.Popen[str]] = []

    def start(where: list[str], *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), *where, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line, process.stderr.read() if process.stderr else ""
    return line


def _waiting(where: list[str], count: int) -> None:
    """Until the session's hold queue holds ``count`` tickets."""
    deadline = time.monotonic() + 30
    while _tickets(where) != count:
        assert time.monotonic() < deadline, f"{_tickets(where)} tickets, not {count}"
        time.sleep(0.02)


def _tickets(where: list[str]) -> int:
    kind, place = where
    statement = "SELECT COUNT(*) FROM kova_session_holds WHERE session_id = 'c'"
    if kind == "sqlite":
        with sqlite3.connect(place) as connection:
            return int(connection.execute(statement).fetchone()[0])
    import psycopg

    with psycopg.connect(place) as connection:
        row = connection.execute(statement).fetchone()
        assert row is not None
        return int(row[0])


def _load(where: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(WORKER), *where, "load"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return done.stdout.split()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_processes_wait_for_a_busy_session_in_arrival_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, started: Any
) -> None:
    where = _store_args(kind, tmp_path, request)
    release = tmp_path / "release"
    holder = started(where, "hold", "a", str(release))
    assert _line(holder) == "held"
    waiters = []
    for count, name in enumerate(("b", "c", "d"), start=2):
        waiters.append(started(where, "append", name))
        _waiting(where, count)  # each queued before the next starts
    refused = started(where, "append", "x", "--no-wait")
    assert _line(refused) == "busy"
    release.touch()
    assert _line(holder) == "released"
    for waiter in waiters:
        assert _line(waiter) == "appended"
        assert waiter.wait(timeout=30) == 0
    assert _load(where) == ["a", "b", "c", "d"]
    assert _tickets(where) == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_killed_holder_frees_the_session_for_a_waiting_process(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, started: Any
) -> None:
    # SQLite: a holder of this machine that is gone frees the session at once; PostgreSQL
    # knows no processes, only the lease (1 s here).
    where = _store_args(kind, tmp_path, request)
    holder = started(where, "hold", "a", str(tmp_path / "never"), "--lease", "1")
    assert _line(holder) == "held"
    waiter = started(where, "append", "b", "--lease", "1")
    _waiting(where, 2)
    time.sleep(2.5)  # the holder's lease was renewed past its first second
    assert waiter.poll() is None
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    killed = time.monotonic()
    assert _line(waiter) == "appended"
    freed = time.monotonic() - killed
    assert freed < (1.0 if kind == "sqlite" else 2.5)
    assert _load(where) == ["a", "b"]
