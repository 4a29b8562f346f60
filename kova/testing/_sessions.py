"""The session store conformance suite: ``await check_session_store(make_store)``.

One async function that checks a :class:`~kova.sessions.SessionStore` against every rule
kova's own stores keep, through the public API, and raises :class:`AssertionError` naming
the first rule broken. kova runs it on :class:`~kova.sessions.SqliteSessionStore` and
:class:`~kova.sessions.PostgresSessionStore`; run it on your own (Redis, DynamoDB) in a
trio test::

    async def test_my_store(tmp_path):
        await check_session_store(lambda: MyStore(...))

It uses session ids of its own (a random prefix), so the store may hold other sessions.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Literal

import trio

from .._errors import SessionBusyError, SessionConflictError
from .._messages import Image, Message, RedactedThinking, Text, Thinking, ToolResult, ToolUse
from ..sessions._store import SessionInfo, SessionStore, SessionWrite

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..sessions._store import Session

    _Ids = Callable[[str], str]
    """Makes a session id of this run's from a name."""
    _Turn = tuple[Message, ...]

__all__ = ["check_session_store"]


def _messages(tag: str) -> tuple[Message, ...]:
    """One turn's messages, with every kind of block and awkward text."""
    return (
        Message.user(f"{tag}: héllo 🌍 \"quotes\" 'single' \\ back\\slash \x00 nul \ud83d half"),
        Message.assistant(
            [
                Thinking(text="thinking " + tag, signature="sig-" + tag),
                RedactedThinking(data="opaque=="),
                Text(text="calling a tool"),
                ToolUse(id="call_" + tag, name="lookup", input={"q": tag, "n": [1, 2.5, None]}),
            ]
        ),
        Message.tool_results([ToolResult.error("no such thing " + tag, tool_use_id="call_" + tag)]),
        Message.user([Image(media_type="image/png", data="iVBORw0KGgo=")]),
        Message.assistant("done " + tag + " " + "x" * 20_000),
    )


class _Rule:
    """Names the rule being checked in the AssertionError of a failed check."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> Literal[False]:
        if exc is None or not isinstance(exc, Exception):
            return False
        if isinstance(exc, AssertionError):
            detail = str(exc)
            raise AssertionError(
                f"session store rule broken: {self.name}" + (f" ({detail})" if detail else "")
            ) from exc
        raise AssertionError(
            f"session store rule broken: {self.name} (raised {type(exc).__name__}: {exc})"
        ) from exc


async def check_session_store(make_store: Callable[[], SessionStore]) -> None:
    """Check the store ``make_store()`` returns (entered with ``async with``) against every
    rule of a session store.

    Raises:
        AssertionError: naming the first rule the store breaks.
    """
    store = make_store()
    with _Rule("make_store() returns a kova.sessions.SessionStore"):
        assert isinstance(store, SessionStore), type(store).__name__
    async with store:
        await _check(store, uuid.uuid4().hex[:10])


async def _check(store: SessionStore, run: str) -> None:
    def sid(name: str) -> str:
        return f"kova-check-{run}-{name}"

    first, second = _messages("one"), _messages("two")
    session = store.session(sid("main"))
    await _check_writes(store, sid, session, first, second)
    await _check_race(store, sid)
    await _check_pending(store, sid, first)
    await _check_view(store, sid, first, second)
    await _check_listing(store, sid, session, first, second)
    forks = await _check_branches(store, sid, session, first, second)
    await _check_ids(store, sid)
    await _check_waiting(store, sid)
    for name in ("main", "race", "paused", "paused2", "gate", "a'; DROP TABLE x; --"):
        await store.delete(sid(name))
    for name in ("ü ñ 🌍", "A", "a"):
        await store.delete(sid(name))
    for fork in forks:
        await store.delete(fork)


async def _check_writes(
    store: SessionStore, sid: _Ids, session: Session, first: _Turn, second: _Turn
) -> None:
    with _Rule("an unknown session is empty (load() == [], version 0) and not listed"):
        unknown = store.session(sid("unknown"))
        assert await unknown.load() == []
        assert (await store.read(unknown.id)).version == 0
        assert await unknown.pending() is None
        assert all(info.id != unknown.id for info in await store.list())

    with _Rule("append() stores a turn's messages exactly (every block kind, any text)"):
        await session.append(first)
        loaded = await session.load()
        assert loaded == list(first), "the messages read back differ"

    with _Rule("a write returns the new version, one more than the one it replaced"):
        state = await store.read(session.id)
        assert state.version >= 1
        version = await store.write(
            session.id,
            SessionWrite(
                version=state.version,
                keep=len(state.messages),
                messages=second,
                turn=state.turns[-1] + 1,
                input_tokens=7,
                output_tokens=5,
            ),
        )
        assert version == state.version + 1, (state.version, version)
        after = await store.read(session.id)
        assert after.version == version
        assert after.messages == (*first, *second)

    with _Rule("read() gives each message the number of the turn that added it"):
        assert len(after.turns) == len(after.messages)
        assert after.turns == (state.turns[-1],) * len(first) + (state.turns[-1] + 1,) * len(
            second
        ), after.turns

    with _Rule(
        "a write with a stale version is refused with SessionConflictError, changing nothing"
    ):
        try:
            await store.write(
                session.id,
                SessionWrite(version=state.version, keep=0, messages=(Message.user("late"),)),
            )
        except SessionConflictError:
            pass
        else:
            raise AssertionError("the stale write was accepted")
        assert await store.read(session.id) == after

    with _Rule("a write to an unknown session with a version other than 0 is refused"):
        try:
            await store.write(sid("never"), SessionWrite(version=3, keep=0))
        except SessionConflictError:
            pass
        else:
            raise AssertionError("accepted")
        assert (await store.read(sid("never"))).version == 0


async def _check_race(store: SessionStore, sid: _Ids) -> None:
    with _Rule("of concurrent writes after the same version exactly one is stored"):
        racing = store.session(sid("race"))
        await racing.append((Message.user("start"),))
        base = await store.read(racing.id)
        won: list[int] = []

        async def write(index: int) -> None:
            try:
                await store.write(
                    racing.id,
                    SessionWrite(
                        version=base.version,
                        keep=1,
                        messages=(Message.user(f"writer {index}"), Message.assistant("ok")),
                        turn=2,
                    ),
                )
            except SessionConflictError:
                return
            won.append(index)

        async with trio.open_nursery() as nursery:
            for index in range(8):
                nursery.start_soon(write, index)
        assert len(won) == 1, f"{len(won)} writers appended after the same message"
        final = await racing.load()
        assert final == [
            Message.user("start"),
            Message.user(f"writer {won[0]}"),
            Message.assistant("ok"),
        ]

    with _Rule("keep= removes the later messages and adds the new ones in one write"):
        current = await store.read(racing.id)
        await store.write(
            racing.id,
            SessionWrite(
                version=current.version, keep=1, messages=(Message.user("again"),), turn=9
            ),
        )
        again = await store.read(racing.id)
        assert again.messages == (Message.user("start"), Message.user("again"))
        assert again.turns == (current.turns[0], 9)

    with _Rule("a write with keep past the stored messages is refused, changing nothing"):
        try:
            await store.write(racing.id, SessionWrite(version=again.version, keep=5))
        except (ValueError, SessionConflictError):
            pass
        except Exception as exc:  # a store's own error is fine, as long as nothing changed
            if "keep" not in str(exc):
                raise
        else:
            raise AssertionError("accepted")
        assert await store.read(racing.id) == again


async def _check_view(store: SessionStore, sid: _Ids, first: _Turn, second: _Turn) -> None:
    with _Rule(
        "a compacted view is stored with a write, kept by later appends, dropped by a rewind"
    ):
        viewed = store.session(sid("view"))
        summary = (Message.user("[summary of the first turn]"),)
        await viewed.append(first)
        state = await store.read(viewed.id)
        assert state.view is None, state.view
        await store.write(
            viewed.id,
            SessionWrite(
                version=state.version,
                keep=len(first),
                messages=second[:2],
                turn=2,
                view=summary,
                view_covers=len(first) + 2,
            ),
        )
        state = await store.read(viewed.id)
        assert state.view == summary, state.view
        assert state.view_covers == len(first) + 2, state.view_covers
        assert await viewed.load(compacted=True) == list(summary)
        await viewed.append(second[2:])
        assert await viewed.load(compacted=True) == [*summary, *second[2:]]
        assert len(await viewed.load()) == len(first) + len(second)  # the full history stays
        await viewed.rewind()  # the turn after the view: the view stays
        assert await viewed.load(compacted=True) == list(summary)
        await viewed.rewind()  # back into what the view stands for: it goes
        state = await store.read(viewed.id)
        assert state.view is None, state.view
        assert await viewed.load(compacted=True) == list(first)
        await store.delete(viewed.id)


async def _check_listing(
    store: SessionStore, sid: _Ids, session: Session, first: _Turn, second: _Turn
) -> None:
    with _Rule("list() has each session's message count, token totals, title and times"):
        state = await store.read(session.id)
        await store.write(
            session.id,
            SessionWrite(
                version=state.version,
                keep=len(state.messages),
                input_tokens=3,
                output_tokens=2,
            ),
        )
        infos = {info.id: info for info in await store.list()}
        info = infos.get(session.id)
        assert isinstance(info, SessionInfo), "the session is not listed"
        assert info.messages == len(first) + len(second), info.messages
        assert info.input_tokens == 10, info
        assert info.output_tokens == 7, info
        assert info.title is not None, info
        assert info.title.startswith("one: héllo"), info.title
        assert 0 < info.created <= info.updated, info
        assert not info.pending
        assert infos[sid("race")].messages == 2

    with _Rule("the title is kept once set, and set by a write that gives one"):
        state = await store.read(session.id)
        await store.write(session.id, SessionWrite(version=state.version, keep=len(state.messages)))
        assert {i.id: i for i in await store.list()}[session.id].title == info.title
        state = await store.read(session.id)
        await store.write(
            session.id,
            SessionWrite(version=state.version, keep=len(state.messages), title="renamed"),
        )
        assert {i.id: i for i in await store.list()}[session.id].title == "renamed"

    with _Rule("list() orders sessions by their last write, the latest first"):
        await trio.sleep(0.01)
        await store.session(sid("paused")).append((Message.user("latest"),))
        mine = [i.id for i in await store.list() if i.id.startswith(sid(""))]
        assert mine[0] == sid("paused"), mine


async def _check_branches(
    store: SessionStore, sid: _Ids, session: Session, first: _Turn, second: _Turn
) -> tuple[str, ...]:
    """The rewind, fork, clear and delete rules; returns the forks left to delete."""
    with _Rule("rewind(turns=1) removes the last turn's messages and only those"):
        removed = await session.rewind()
        assert removed == len(second), removed
        assert await session.load() == list(first)

    with _Rule("fork() copies every message into a new session and leaves the old one"):
        await session.append(second)
        branch = await session.fork()
        assert branch.id != session.id
        assert await branch.load() == [*first, *second]
        await branch.append((Message.user("only in the branch"),))
        assert await session.load() == [*first, *second]
        assert len(await branch.load()) == len(first) + len(second) + 1

    with _Rule("fork(at=n) copies the first n messages"):
        early = await session.fork(at=2)
        assert await early.load() == list(first[:2])

    with _Rule("fork() keeps a paused turn's pending state; fork(at=...) before it does not"):
        await store.write(
            sid("paused2"),
            SessionWrite(version=0, keep=0, messages=first[:2], turn=1, pending='{"y": 2}'),
        )
        whole = await store.session(sid("paused2")).fork()
        assert (await store.read(whole.id)).pending == '{"y": 2}'
        cut = await store.session(sid("paused2")).fork(at=1)
        assert (await store.read(cut.id)).pending is None

    with _Rule("rewind() past the first turn leaves the session empty"):
        assert await branch.rewind(turns=50) == len(first) + len(second) + 1
        assert await branch.load() == []

    with _Rule("clear() removes every message and the pending state"):
        await store.session(sid("paused2")).clear()
        state = await store.read(sid("paused2"))
        assert state.messages == (), state.messages
        assert state.pending is None
        listed = {i.id: i for i in await store.list()}
        assert listed[sid("paused2")].messages == 0

    with _Rule("delete() removes the session: not listed, empty, version 0"):
        await branch.delete()
        assert await branch.load() == []
        assert (await store.read(branch.id)).version == 0
        assert all(i.id != branch.id for i in await store.list())
        await branch.delete()  # idempotent

    return early.id, whole.id, cut.id


async def _check_ids(store: SessionStore, sid: _Ids) -> None:
    with _Rule("session ids are kept apart exactly (quotes, unicode, 512 characters)"):
        names = [sid("a'; DROP TABLE x; --"), sid("ü ñ 🌍"), sid("A"), sid("a"), "s" * 512]
        for index, name in enumerate(names):
            await store.session(name).append((Message.user(f"#{index}"),))
        for index, name in enumerate(names):
            assert await store.session(name).load() == [Message.user(f"#{index}")], name
        long_branch = await store.session("s" * 512).fork()
        assert len(long_branch.id) <= 512, len(long_branch.id)
        assert await long_branch.load() == [Message.user(f"#{len(names) - 1}")]
        await store.delete(long_branch.id)
        await store.delete("s" * 512)


async def _check_waiting(store: SessionStore, sid: _Ids) -> None:
    with _Rule("a second turn on a session waits for the first (wait=True)"):
        order: list[str] = []
        holder = store.session(sid("gate"))
        release = trio.Event()

        started = trio.Event()

        async def first_turn(history: tuple[Message, ...]) -> object:
            order.append("first started")
            started.set()
            await release.wait()
            order.append("first finished")
            raise _Stop

        async def held() -> None:
            with contextlib.suppress(_Stop):
                await holder.run_turn((Message.user("q"),), first_turn)

        async def waiting() -> None:
            await holder.append((Message.user("second"),))
            order.append("second appended")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held)
            await started.wait()
            nursery.start_soon(waiting)
            await trio.sleep(0.2)  # time for the second to append, were it not held
            assert order == ["first started"], order
            with _Rule("a turn on a busy session with wait=False raises SessionBusyError"):
                try:
                    await store.session(holder.id, wait=False).append((Message.user("x"),))
                except SessionBusyError:
                    pass
                else:
                    raise AssertionError("it ran")
            release.set()
        assert order == ["first started", "first finished", "second appended"], order
        assert await holder.load() == [Message.user("second")]

    with _Rule("a failed turn appends nothing"):
        assert await store.session(sid("gate")).load() == [Message.user("second")]


class _Stop(Exception):
    pass


async def _check_resumed(store: SessionStore, session_id: str, first: Sequence[Message]) -> None:
    with _Rule("the decisions a resume took (resumed) are stored and cleared by the next write"):
        await store.write(
            session_id,
            SessionWrite(version=0, keep=0, messages=tuple(first[:2]), turn=1, pending="{}"),
        )
        await store.write(
            session_id, SessionWrite(version=1, keep=2, pending="{}", resumed="nonce-1")
        )
        state = await store.read(session_id)
        assert (state.pending, state.resumed) == ("{}", "nonce-1")
        assert state.messages == tuple(first[:2])
        await store.write(session_id, SessionWrite(version=2, keep=2, pending="{}"))
        assert (await store.read(session_id)).resumed is None


async def _check_pending(
    store: SessionStore, sid: Callable[[str], str], first: tuple[Message, ...]
) -> None:
    with _Rule("the pending state is stored with the write and replaced by the next"):
        paused = store.session(sid("paused"))
        await store.write(
            paused.id,
            SessionWrite(version=0, keep=0, messages=first[:2], turn=1, pending='{"x": 1}'),
        )
        assert (await store.read(paused.id)).pending == '{"x": 1}'
        state = await store.read(paused.id)
        await store.write(
            paused.id,
            SessionWrite(version=state.version, keep=2, messages=first[2:], turn=1),
        )
        state = await store.read(paused.id)
        assert state.pending is None
        assert state.messages == first

    await _check_resumed(store, sid("taken"), first)
