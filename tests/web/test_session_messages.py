"""The page's session messages (``sessions``, ``open``) in the schema: what is accepted and
what closes the connection."""

from __future__ import annotations

import json

import pytest

from kova.web._schema import ListSessions, OpenSession, PageMessageError, parse_page_message


def _parse(message: dict[str, object]) -> object:
    return parse_page_message(json.dumps({"v": 1, **message}), max_chat_chars=100)


def test_sessions_and_open_are_parsed() -> None:
    assert _parse({"type": "sessions"}) == ListSessions()
    assert _parse({"type": "open", "session": "alice"}) == OpenSession(session="alice")
    assert _parse({"type": "open", "session": None}) == OpenSession(session=None)
    assert _parse({"type": "open"}) == OpenSession(session=None)


@pytest.mark.parametrize(
    "message",
    [
        {"type": "sessions", "extra": 1},
        {"type": "open", "session": 5},
        {"type": "open", "session": "x" * 513},
        {"type": "open", "session": "a", "more": True},
    ],
)
def test_malformed_session_messages_are_refused(message: dict[str, object]) -> None:
    with pytest.raises(PageMessageError):
        _parse(message)
