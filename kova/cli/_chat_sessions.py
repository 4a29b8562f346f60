"""``kova chat --session NAME``: the conversation kept in a session store, and the commands
that work on it (``/sessions``, ``/session NAME``, ``/fork``, ``/undo``, ``/clear``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._messages import Message
    from ..sessions import Session

__all__ = ["COMMANDS", "HELP", "default_store_path", "session_command"]

COMMANDS = ("/sessions", "/session", "/fork", "/undo", "/clear")

HELP = (
    "sessions: /sessions lists them, /session NAME switches to one, /fork continues in a "
    "copy of this one, /undo removes the last turn, /clear empties it"
)


def default_store_path() -> Path:
    """Where ``--session`` keeps sessions without ``--sessions-db``: ``$KOVA_SESSIONS_DB``,
    else ``~/.kova/sessions.db``."""
    named = os.environ.get("KOVA_SESSIONS_DB")
    return Path(named) if named else Path.home() / ".kova" / "sessions.db"


def _age(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


async def session_command(
    session: Session, text: str, history: list[Message], write: Callable[[str], None]
) -> Session:
    """Run one session command; returns the session the chat goes on in. ``history`` is the
    chat's copy of the conversation (updated here); ``write`` prints a line."""
    from ..sessions._store import check_session_id_text

    command, _, argument = text.partition(" ")
    argument = argument.strip()
    store = session.store
    if command == "/sessions":
        infos = await store.list()
        if not infos:
            write("(no sessions yet)\n")
        now = time.time()
        for info in infos:
            mark = "*" if info.id == session.id else " "
            title = f"  {info.title}" if info.title else ""
            waits = "  (waits for approvals)" if info.pending else ""
            write(
                f"{mark} {info.id}  {info.messages} messages, {_age(now - info.updated)}"
                f"{title}{waits}\n"
            )
        return session
    if command == "/session":
        problem = check_session_id_text(argument) if argument else "give its name"
        if problem:
            write(f"(/session NAME switches to a session: {problem})\n")
            return session
        other = store.session(argument)
        history[:] = await other.load()
        write(f"(session {other.id}: {len(history)} messages)\n")
        return other
    if command == "/fork":
        branch = await session.fork()
        write(f"(forked: now in session {branch.id}; {session.id} is kept as it was)\n")
        return branch
    if command == "/undo":
        removed = await session.rewind()
        history[:] = await session.load()
        write(
            f"(removed the last turn: {removed} messages)\n" if removed else "(nothing to undo)\n"
        )
        return session
    assert command == "/clear"
    await session.clear()
    history.clear()
    write("(conversation cleared)\n")
    return session
