"""An in-memory session store for the tests: a correct one, and broken ones that the
conformance suite must catch."""

from __future__ import annotations

import contextlib
import time

import trio

from kova._messages import Message
from kova.errors import SessionConflictError
from kova.sessions import SessionInfo, SessionState, SessionStore, SessionWrite


class _Row:
    def __init__(self, now: float) -> None:
        self.version = 0
        self.created = self.updated = now
        self.title: str | None = None
        self.messages: list[tuple[int, Message]] = []
        self.input_tokens = self.output_tokens = 0
        self.pending: str | None = None
        self.view: tuple[Message, ...] | None = None
        self.view_covers = 0
        self.resumed: str | None = None


class MemorySessionStore(SessionStore):
    """Sessions in a dict (one process, gone when it exits)."""

    def __init__(self) -> None:
        self.rows: dict[str, _Row] = {}

    async def read(self, session_id: str) -> SessionState:
        await trio.lowlevel.checkpoint()
        row = self.rows.get(session_id)
        if row is None:
            return SessionState(version=0)
        return SessionState(
            version=row.version,
            messages=tuple(message for _, message in row.messages),
            turns=tuple(turn for turn, _ in row.messages),
            pending=row.pending,
            title=row.title,
            view=row.view,
            view_covers=row.view_covers,
            resumed=row.resumed,
        )

    async def write(self, session_id: str, change: SessionWrite) -> int:
        await trio.lowlevel.checkpoint()
        row = self.rows.get(session_id)
        found = 0 if row is None else row.version
        if found != change.version:
            raise SessionConflictError(session_id, change.version, found)
        now = time.time()
        new = _Row(now) if row is None else row
        if not 0 <= change.keep <= len(new.messages):
            raise ValueError(f"keep must be between 0 and {len(new.messages)}")
        self.apply(new, change, now)
        self.rows[session_id] = new
        return new.version

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        del row.messages[change.keep :]
        row.messages.extend((change.turn, message) for message in change.messages)
        row.version += 1
        row.updated = now
        if change.title is not None:
            row.title = change.title
        row.pending = change.pending
        row.resumed = change.resumed
        row.input_tokens += change.input_tokens
        row.output_tokens += change.output_tokens
        if change.view is not None:
            row.view, row.view_covers = change.view, change.view_covers
        elif change.keep < row.view_covers:
            row.view, row.view_covers = None, 0

    async def list(self) -> list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        infos = [
            SessionInfo(
                id=key,
                created=row.created,
                updated=row.updated,
                title=row.title,
                messages=len(row.messages),
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                pending=row.pending is not None,
            )
            for key, row in self.rows.items()
        ]
        return sorted(infos, key=lambda info: -info.updated)

    async def delete(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        self.rows.pop(session_id, None)


class NoVersionCheck(MemorySessionStore):
    """Broken: appends whatever version the writer read (lost updates)."""

    async def write(self, session_id: str, change: SessionWrite) -> int:
        row = self.rows.get(session_id)
        if row is not None:
            change = SessionWrite(**{**_fields(change), "version": row.version})
        return await super().write(session_id, change)


class YieldsMidWrite(MemorySessionStore):
    """Broken: checks the version, then yields before writing (a check-then-act race)."""

    async def write(self, session_id: str, change: SessionWrite) -> int:
        row = self.rows.get(session_id)
        found = 0 if row is None else row.version
        if found != change.version:
            raise SessionConflictError(session_id, change.version, found)
        await trio.sleep(0.001)
        now = time.time()
        new = self.rows.get(session_id) or _Row(now)
        self.apply(new, change, now)
        self.rows[session_id] = new
        return new.version


class ForgetsTurns(MemorySessionStore):
    """Broken: stores every message as turn 0."""

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        super().apply(row, SessionWrite(**{**_fields(change), "turn": 0}), now)


class DropsPending(MemorySessionStore):
    """Broken: never stores the pending state."""

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        super().apply(row, SessionWrite(**{**_fields(change), "pending": None}), now)


class ForgetsResumed(MemorySessionStore):
    """Broken: never stores the decisions a resume took (an older store's write)."""

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        super().apply(row, SessionWrite(**_fields(change)), now)


class LosesSurrogates(MemorySessionStore):
    """Broken: stores text as UTF-8 with replacement (a lone surrogate becomes '?')."""

    async def write(self, session_id: str, change: SessionWrite) -> int:
        from kova._json import dumps, loads

        messages = tuple(
            Message.from_dict(
                loads(
                    dumps(m.to_dict()).encode("utf-8", "replace").decode().replace("\\ud83d", "?")
                )
            )
            for m in change.messages
        )
        return await super().write(
            session_id, SessionWrite(**{**_fields(change), "messages": messages})
        )


class CountsTokensOnce(MemorySessionStore):
    """Broken: keeps the last write's token counts instead of the totals."""

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        row.input_tokens = row.output_tokens = 0
        super().apply(row, change, now)


def _fields(change: SessionWrite) -> dict[str, object]:
    return {
        name: getattr(change, name)
        for name in (
            "version",
            "keep",
            "messages",
            "turn",
            "pending",
            "input_tokens",
            "output_tokens",
            "title",
            "view",
            "view_covers",
        )
    }


class KeepsStaleView(MemorySessionStore):
    """Broken: a rewind into the messages a compacted view stands for keeps the view."""

    def apply(self, row: _Row, change: SessionWrite, now: float) -> None:
        view, covers = row.view, row.view_covers
        super().apply(row, change, now)
        if change.view is None:
            row.view, row.view_covers = view, covers


class NoWaiting(MemorySessionStore):
    """Broken: a second turn on a busy session runs at once instead of waiting."""

    def _gate(
        self, session_id: str, wait: bool, timeout: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()
