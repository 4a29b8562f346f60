"""``kova chat --session NAME``: the conversation lives in a session, and /sessions,
/session NAME, /fork, /undo and /clear work on it."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from kova import Message, Role, Text
from kova.cli._chat import ChatOptions, run_chat
from kova.cli._providers import SelectedProvider
from kova.sessions import SqliteSessionStore
from kova.testing import FunctionProvider, ScriptRequest, reply_text

if TYPE_CHECKING:
    from pathlib import Path


def _model(request: ScriptRequest) -> Any:
    prompts = [m for m in request.messages if m.role is Role.USER]
    last = "".join(b.text for b in prompts[-1].content if isinstance(b, Text))
    return reply_text(f"{len(prompts)} prompts, last: {last}")


async def _chat(db: Path, name: str, typed: str) -> str:
    out = io.StringIO()
    options = ChatOptions(
        selected=SelectedProvider(name="fake", model="m", provider=FunctionProvider(_model)),
        session=name,
        sessions_path=db,
        tools=(),
    )
    status = await run_chat(options, stdin=io.StringIO(typed), out=out)
    assert status == 0
    return out.getvalue()


async def test_a_chat_goes_on_in_its_session_and_commands_work_on_it(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    first = await _chat(db, "work", "hello\nsecond\n/exit\n")
    assert "2 prompts, last: second" in first
    # A new chat on the session goes on where the first stopped.
    shown = await _chat(db, "work", "third\n/sessions\n/undo\n/fork\nbranch turn\n/exit\n")
    assert "resumed 4 messages" in shown
    assert "3 prompts, last: third" in shown
    assert "* work  6 messages" in shown  # listed, current, title from the first prompt
    assert "hello" in shown.split("* work", 1)[1].splitlines()[0]
    assert "(removed the last turn: 2 messages)" in shown
    assert "(forked: now in session work~" in shown
    assert "3 prompts, last: branch turn" in shown  # the branch has the undone history
    async with SqliteSessionStore(db) as store:
        infos = {info.id: info for info in await store.list()}
        assert infos["work"].messages == 4  # the undo stands; the branch turn went elsewhere
        (branch,) = [i for i in infos if i.startswith("work~")]
        assert infos[branch].messages == 6
        assert (await store.session(branch).load())[-2] == Message.user("branch turn")


async def test_switching_and_clearing_sessions(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    shown = await _chat(db, "a", "in a\n/session b\nin b\n/session\n/clear\n/undo\n/exit\n")
    assert "(session b: 0 messages)" in shown
    assert "1 prompts, last: in b" in shown
    assert "(/session NAME switches to a session: give its name)" in shown
    assert "(conversation cleared)" in shown
    assert "(nothing to undo)" in shown
    async with SqliteSessionStore(db) as store:
        assert len(await store.session("a").load()) == 2
        assert await store.session("b").load() == []


async def test_session_commands_without_a_session_say_how_to_get_one(tmp_path: Path) -> None:
    out = io.StringIO()
    options = ChatOptions(
        selected=SelectedProvider(name="fake", model="m", provider=FunctionProvider(_model)),
        tools=(),
    )
    await run_chat(options, stdin=io.StringIO("/sessions\n/exit\n"), out=out)
    assert "(no session: start kova chat with --session NAME)" in out.getvalue()
