"""The web view's sessions in a real browser (headless Chromium): ``kova serve`` with a
session store lists the stored sessions, opens one (its history shown, on a page that
reconnects too) and continues it; "New" starts another."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

import trio

from kova import Message
from kova.sessions import SqliteSessionStore
from kova.testing import ScriptedProvider, ScriptRequest, reply_text

from ._browser import Browser, Tab, open_tab

if TYPE_CHECKING:
    from pathlib import Path

    from kova.testing import Reply

LAST_TURN = "document.querySelector('section.turn:last-of-type')"


async def _ask(tab: Tab, text: str) -> None:
    await tab.evaluate(f"document.getElementById('prompt').value = {json.dumps(text)}")
    await tab.evaluate("document.getElementById('send').click()")
    await tab.wait_for(f"{LAST_TURN} && {LAST_TURN}.innerText.includes({json.dumps(text)})")
    await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")


async def _open(tab: Tab, title: str) -> None:
    await tab.evaluate("document.getElementById('sessions-button').click()")
    await tab.wait_for("!document.getElementById('sessions').hidden")
    found = (
        "[...document.querySelectorAll('#session-list .open-session')]"
        f".find((b) => b.textContent === {json.dumps(title)})"
    )
    await tab.wait_for(found)
    await tab.evaluate(f"{found}.click()")
    await tab.wait_for("document.getElementById('sessions').hidden")


async def test_sessions_are_listed_opened_and_continued_from_the_page(
    browser: Browser, tmp_path: Path
) -> None:
    from kova.cli._serve import serve_chat

    def model(request: ScriptRequest) -> Reply:
        said = [m.text for m in request.messages if m.role.value == "user"]
        return reply_text(f"heard {len(said)}: {' / '.join(said)}")

    provider = ScriptedProvider(model)
    store = SqliteSessionStore(tmp_path / "web.db")
    async with store:
        # A conversation stored before the page was opened (by another process, say).
        await store.session("earlier").append(
            [Message.user("plan the trip to Oslo"), Message.assistant("Pack gloves.")]
        )
        async with trio.open_nursery() as nursery:
            url = await nursery.start(
                partial(serve_chat, provider, sessions=store, out=lambda line: None)
            )
            async with open_tab(browser, url) as tab:
                await tab.wait_for("!document.getElementById('chat').hidden")
                assert not await tab.evaluate("document.getElementById('sessions-button').hidden")

                # A new conversation: the first prompt makes its session.
                await _ask(tab, "hello there")
                assert "heard 1: hello there" in await tab.evaluate(f"{LAST_TURN}.innerText")

                # The list shows both; the stored one opens with its history.
                await _open(tab, "plan the trip to Oslo")
                history = await tab.evaluate("document.querySelector('section.history').innerText")
                assert "plan the trip to Oslo" in history
                assert "Pack gloves." in history
                assert await tab.evaluate("document.querySelectorAll('section.turn').length") == 0

                # Continued: the model sees the stored history, the session keeps the turn.
                await _ask(tab, "and the hotel?")
                shown = await tab.evaluate(f"{LAST_TURN}.innerText")
                assert "heard 2: plan the trip to Oslo / and the hotel?" in shown
                assert tab.console == [], tab.console

            # A page opened later (or reconnecting) shows the open session and its turn.
            async with open_tab(browser, url) as again:
                await again.wait_for("document.querySelector('section.history')")
                text = await again.evaluate("document.getElementById('transcript').innerText")
                assert "Pack gloves." in text
                assert "heard 2: plan the trip to Oslo / and the hotel?" in text

                # "New" starts an empty conversation; the first one is still listed.
                await again.evaluate("document.getElementById('new-session').click()")
                await again.wait_for(
                    "!document.getElementById('transcript').innerText.includes('Pack gloves.')"
                )
                await _ask(again, "fresh start")
                shown = await again.evaluate(f"{LAST_TURN}.innerText")
                assert "heard 1: fresh start" in shown
                await _open(again, "hello there")
                assert "heard 1: hello there" in await again.evaluate(
                    "document.querySelector('section.history').innerText"
                )
                assert again.console == [], again.console
            nursery.cancel_scope.cancel()

        infos = {info.title: info for info in await store.list()}
    assert set(infos) == {"plan the trip to Oslo", "hello there", "fresh start"}
    assert infos["plan the trip to Oslo"].messages == 4
    assert [m.text for m in await store.session("earlier").load()] == [
        "plan the trip to Oslo",
        "Pack gloves.",
        "and the hotel?",
        "heard 2: plan the trip to Oslo / and the hotel?",
    ]
