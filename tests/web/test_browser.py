"""The page in a real browser: Debian's headless Chromium against a scripted model."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from kova import Message, ToolAnnotations
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool
from kova.web import open_event_server

from ._browser import Browser, open_tab, png_pixels

if TYPE_CHECKING:
    from kova.web import EventServer

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "web-screenshot.png"
INTRO = "Let me look up the weather in Oslo before I answer."


@tool
def get_weather(city: str) -> str:
    """Current weather.

    Args:
        city: the city.
    """
    return f"-3°C and light snow in {city}"


def _provider(answer: str) -> ScriptedProvider:
    return ScriptedProvider(
        [
            StreamReply(
                response=reply_tool_calls(("get_weather", {"city": "Oslo"}), text=INTRO),
                chunk_chars=5,
            ),
            StreamReply(response=reply_text(answer), chunk_chars=5),
        ]
    )


async def _turn(server: EventServer, provider: ScriptedProvider, prompt: str) -> None:
    annotations = {"get_weather": ToolAnnotations(read_only=True, title="Weather lookup")}
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(get_weather)
        .approval_handler(server.approval_handler(annotations=annotations, timeout=120))
        .build()
    )
    async with agent, agent.stream([Message.user(prompt)]) as events:
        async for _ in server.relay(events, prompt=prompt):
            pass


LAST_TURN = "document.querySelector('section.turn:last-of-type')"


async def test_stream_approve_and_deny_in_chromium(browser: Browser) -> None:
    async with open_event_server() as server, open_tab(browser, server.url) as tab:
        await tab.wait_for("document.getElementById('status').textContent === 'live'")

        # 1. A streamed answer appears; the tool call waits for approval.
        answer = "Right now Oslo has -3°C and light snow: wear a warm coat and boots."
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_turn, server, _provider(answer), "Weather in Oslo?")
            await tab.wait_for("document.querySelector('[data-approval] button.approve')")
            shown = await tab.evaluate(f"{LAST_TURN}.innerText")
            assert "Weather in Oslo?" in shown
            assert INTRO in shown
            assert "Approve Weather lookup?" in shown
            assert "read-only" in shown
            assert '"city": "Oslo"' in shown

            # A screenshot mid-turn: not blank, and the streamed text is on the page.
            png = await tab.screenshot()
            assert png_pixels(png, header_only=True)[:2] == (420, 860)
            width, height, pixels = png_pixels(await tab.screenshot(scale=0.25))
            assert (width, height) == (105, 215)
            background = max(set(pixels), key=pixels.count)
            inked = sum(1 for pixel in pixels if pixel != background)
            assert inked > 0.02 * len(pixels), f"the page looks blank: {inked} pixels"
            assert len(set(pixels)) > 50  # text, buttons, colours: not one flat fill
            if os.environ.get("KOVA_UPDATE_SCREENSHOT"):  # docs/web.md shows this one
                SCREENSHOT.write_bytes(png)

            await tab.evaluate("document.querySelector('[data-approval] button.approve').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
        shown = await tab.evaluate(f"{LAST_TURN}.innerText")
        assert answer in shown
        assert "-3°C and light snow in Oslo" in shown  # the tool's result
        assert await tab.evaluate(f"{LAST_TURN}.querySelector('.tool .state').textContent") == (
            "done"
        )
        assert "approved" in await tab.evaluate(
            f"{LAST_TURN}.querySelector('.countdown').textContent"
        )

        # 2. Deny with a reason: the model gets the in-band denial and the turn goes on.
        provider = _provider("Fine, I will not look it up.")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_turn, server, provider, "And now?")
            card = f"{LAST_TURN}.querySelector('[data-approval]')"
            await tab.wait_for(f"{card} && !{card}.querySelector('button.deny').disabled")
            await tab.evaluate(f"{card}.querySelector('input').value = 'not today'")
            await tab.evaluate(f"{card}.querySelector('button.deny').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
        shown = await tab.evaluate(f"{LAST_TURN}.innerText")
        assert "denied by a person on the web page: not today" in shown
        assert "Fine, I will not look it up." in shown
        assert await tab.evaluate(f"{LAST_TURN}.querySelector('.tool .state').textContent") == (
            "error"
        )
        model_saw = json.dumps([str(m.content) for m in provider.requests[1].messages])
        assert "not today" in model_saw

        # 3. A reload (a reconnecting page) shows both turns again.
        await tab.send("Page.reload")
        await tab.wait_for("document.querySelectorAll('section.turn').length === 2")
        assert answer in await tab.evaluate("document.body.innerText")
        assert tab.console == [], tab.console  # no script errors


async def test_kova_serve_chat_from_the_page(browser: Browser) -> None:
    from kova.cli._serve import serve_chat

    provider = _provider("Oslo: -3°C and light snow. Take gloves.")
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            partial(serve_chat, provider, tools=[get_weather], out=lambda line: None)
        )
        async with open_tab(browser, url) as tab:
            await tab.wait_for("!document.getElementById('chat').hidden")
            await tab.evaluate("document.getElementById('prompt').value = 'Weather in Oslo?'")
            await tab.evaluate("document.getElementById('send').click()")
            await tab.wait_for("document.querySelector('[data-approval] button.approve')")
            await tab.evaluate("document.querySelector('[data-approval] button.approve').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
            shown = await tab.evaluate(f"{LAST_TURN}.innerText")
            assert "Weather in Oslo?" in shown
            assert "Oslo: -3°C and light snow. Take gloves." in shown
            assert tab.console == [], tab.console
        nursery.cancel_scope.cancel()
    assert provider.requests[0].messages[-1].text == "Weather in Oslo?"
