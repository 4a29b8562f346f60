"""SqliteSessionStore: its file, its errors, and sessions shared between store objects."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio

from kova import Message
from kova.errors import SessionBusyError, SessionConflictError, SessionError
from kova.sessions import SessionState, SessionStore, SessionWrite, SqliteSessionStore

if TYPE_CHECKING:
    from pathlib import Path


async def test_two_store_objects_on_one_file_share_sessions_and_versions(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as one, SqliteSessionStore(path) as two:
        await one.session("c").append([Message.user("hi"), Message.assistant("hello")])
        assert await two.session("c").load() == [Message.user("hi"), Message.assistant("hello")]
        state = await two.read("c")
        await one.session("c").append([Message.user("more")])
        with pytest.raises(SessionConflictError, match="nothing was appended") as caught:
            await two.write("c", _append(state))
        assert caught.value.expected == state.version
        assert caught.value.found == state.version + 1
        assert isinstance(caught.value, SessionBusyError)
        assert len(await one.session("c").load()) == 3


def _append(state: SessionState) -> SessionWrite:
    """A write after ``state``, adding one message."""
    return SessionWrite(
        version=state.version, keep=len(state.messages), messages=(Message.user("late"),)
    )


async def test_a_file_of_a_newer_kova_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.session("c").append([Message.user("hi")])
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE kova_session_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(SessionError, match="written by a newer kova"):
        async with SqliteSessionStore(path):
            pass


async def test_a_path_that_cannot_be_opened_is_a_session_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="cannot open the session store"):
        async with SqliteSessionStore(tmp_path / "missing" / "dir" / "s.db"):
            pass


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="path must be"):
        SqliteSessionStore(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="busy_timeout"):
        SqliteSessionStore("x.db", busy_timeout=0)
    with pytest.raises(ValueError, match="threads"):
        SqliteSessionStore("x.db", threads=0)
    store = SqliteSessionStore("x.db")
    with pytest.raises(TypeError, match="session id must be a str"):
        store.session(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 to 512"):
        store.session("")
    with pytest.raises(ValueError, match="lone surrogate"):
        store.session("\ud800")
    with pytest.raises(TypeError, match="wait must be a bool"):
        store.session("a", wait=1)  # type: ignore[arg-type]


async def test_append_checks_its_messages_before_anything_is_written(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        session = store.session("c")
        with pytest.raises(TypeError, match=r"messages\[1\] is a str"):
            await session.append([Message.user("a"), "b"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"iterable of kova\.Message"):
            await session.append(Message.user("a"))  # type: ignore[arg-type]
        assert await session.load() == []
        assert await store.list() == []


async def test_a_store_works_without_its_block_and_across_runs(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    await store.session("c").append([Message.user("one")])

    async def second_run() -> list[Message]:
        return await store.session("c").load()

    loaded = await trio.to_thread.run_sync(trio.run, second_run)
    assert loaded == [Message.user("one")]
    await store.aclose()


async def test_a_cancelled_write_still_commits_or_not_but_never_half(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        session = store.session("c")
        turn = [Message.user(f"m{i}") for i in range(200)]
        for attempt in range(20):
            with trio.move_on_after(0.0005 * attempt):
                await session.append(turn)
        loaded = await session.load()
        assert len(loaded) % 200 == 0
        assert all(loaded[i : i + 200] == turn for i in range(0, len(loaded), 200))


async def test_a_store_never_serves_messages_another_changed(tmp_path: Path) -> None:
    # Each store caches the decoded messages of the sessions it used, by version and
    # creation time: another store's append, rewind, or delete-and-make-again (versions
    # start over) is seen on the next load.
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as one, SqliteSessionStore(path) as two:
        await _never_stale(one, two)


async def _never_stale(one: SessionStore, two: SessionStore) -> None:
    await one.session("c").append([Message.user("x")])
    assert await one.session("c").load() == [Message.user("x")]
    await two.session("c").append([Message.user("y")])
    assert await one.session("c").load() == [Message.user("x"), Message.user("y")]
    await two.session("c").rewind()
    assert await one.session("c").load() == [Message.user("x")]
    await trio.sleep(0.01)
    await two.session("c").delete()
    await two.session("c").append([Message.user("z")])  # version 1 again
    assert (await one.read("c")).version == 1
    assert await one.session("c").load() == [Message.user("z")]
    await one.session("c").append([Message.user("w")])
    assert await two.session("c").load() == [Message.user("z"), Message.user("w")]
    assert await one.session("c").load() == [Message.user("z"), Message.user("w")]
    # The same version made again elsewhere: told apart by its creation time.
    await one.session("d").append([Message.user("first d")])
    assert await one.session("d").load() == [Message.user("first d")]
    await trio.sleep(0.01)
    await two.session("d").delete()
    await two.session("d").append([Message.user("second d")])
    assert (await one.read("d")).version == 1
    assert await one.session("d").load() == [Message.user("second d")]
