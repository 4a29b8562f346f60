"""The conformance suite passes on kova's stores and a correct in-memory one, and fails,
naming the rule, on stores broken in one way each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kova.sessions import SqliteSessionStore
from kova.testing import check_session_store

if TYPE_CHECKING:
    from pathlib import Path

from .memory_store import (
    CountsTokensOnce,
    DropsPending,
    ForgetsResumed,
    ForgetsTurns,
    KeepsStaleView,
    LosesSurrogates,
    MemorySessionStore,
    NoVersionCheck,
    NoWaiting,
    YieldsMidWrite,
)


async def test_the_suite_passes_on_the_sqlite_store(tmp_path: Path) -> None:
    await check_session_store(lambda: SqliteSessionStore(tmp_path / "sessions.db"))


async def test_the_suite_passes_on_a_correct_memory_store() -> None:
    await check_session_store(MemorySessionStore)


@pytest.mark.parametrize(
    ("store", "rule"),
    [
        (NoVersionCheck, "a write with a stale version is refused"),
        (YieldsMidWrite, "of concurrent writes after the same version exactly one is stored"),
        (ForgetsTurns, "read() gives each message the number of the turn that added it"),
        (DropsPending, "the pending state is stored with the write"),
        (ForgetsResumed, "the decisions a resume took (resumed) are stored"),
        (LosesSurrogates, "append() stores a turn's messages exactly"),
        (CountsTokensOnce, "list() has each session's message count, token totals"),
        (KeepsStaleView, "a compacted view is stored with a write, kept by later appends"),
        (NoWaiting, "a second turn on a session waits for the first"),
    ],
)
async def test_the_suite_fails_on_a_broken_store(store: type, rule: str) -> None:
    with pytest.raises(AssertionError, match="session store rule broken") as caught:
        await check_session_store(store)
    assert rule in str(caught.value)


async def test_the_suite_wants_a_session_store() -> None:
    with pytest.raises(AssertionError, match=r"returns a kova\.sessions\.SessionStore"):
        await check_session_store(dict)  # type: ignore[arg-type]
