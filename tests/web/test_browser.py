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
from kova.testing import (
    Reply,
    ScriptedProvider,
    ScriptRequest,
    StreamReply,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool
from kova.web import open_event_server

from ._browser import Browser, Tab, open_tab, png_pixels

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
        assert "denied: the person on the web page said: not today" in shown
        assert "denied: denied" not in shown  # the reason is not prefixed twice
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


async def _ask(tab: Tab, text: str) -> None:
    await tab.evaluate(f"document.getElementById('prompt').value = {json.dumps(text)}")
    await tab.evaluate("document.getElementById('send').click()")


async def test_the_stop_button_cancels_the_running_turn(browser: Browser) -> None:
    from kova.cli._serve import serve_chat

    async def model(request: ScriptRequest) -> Reply:
        if request.messages[-1].text == "take your time":
            await trio.sleep_forever()  # until the person presses Stop
        return reply_text("Hello again.")

    provider = ScriptedProvider(model)
    lines: list[str] = []
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_chat, provider, out=lines.append))
        async with open_tab(browser, url) as tab:
            await tab.wait_for("!document.getElementById('chat').hidden")
            assert await tab.evaluate("document.getElementById('stop').hidden")
            await _ask(tab, "take your time")
            await tab.wait_for("!document.getElementById('stop').hidden")
            await tab.evaluate("document.getElementById('stop').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.failed')")
            assert await tab.evaluate(f"{LAST_TURN}.querySelector('.failed').textContent") == (
                "turn stopped"
            )
            await tab.wait_for("document.getElementById('stop').hidden")

            # The stopped turn added nothing: the next one starts from an empty conversation.
            await _ask(tab, "hi")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
            assert tab.console == [], tab.console
        nursery.cancel_scope.cancel()
    assert [m.text for m in provider.requests[-1].messages] == ["hi"]
    assert "kova serve: the turn was stopped from the page" in lines


async def test_demo_approval_waiting_countdown_and_telemetry(browser: Browser) -> None:
    """``kova serve --demo``'s model and tool behind the page: the call waits for approval
    (shown waiting, its arguments once), the countdown follows the server's deadline across
    a reload, telemetry lines can be hidden, a denial is answered sensibly."""
    from kova.cli._main import _open_demo
    from kova.cli._serve import serve_chat

    call = f"{LAST_TURN}.querySelector('[data-call]')"
    async with _open_demo() as (_fake, provider, weather), trio.open_nursery() as nursery:
        url = await nursery.start(
            partial(serve_chat, provider, tools=[weather], approval_timeout=120, out=print)
        )
        async with open_tab(browser, url) as tab:
            await tab.wait_for("!document.getElementById('chat').hidden")
            await _ask(tab, "What's the weather in Tokyo?")
            await tab.wait_for(f"{call} && {call}.querySelector('button.approve')")
            assert await tab.evaluate(f"{call}.querySelector('.state').textContent") == (
                "waiting for approval"
            )
            assert await tab.evaluate(f"{LAST_TURN}.querySelectorAll('.arguments').length") == 1
            assert '"city": "Tokyo"' in await tab.evaluate(f"{call}.innerText")
            left = await tab.evaluate(f"{call}.querySelector('.countdown').textContent")
            assert left in ("120 s left", "119 s left"), left

            # A reload later: the countdown goes on from the server's deadline.
            await trio.sleep(2.5)
            await tab.send("Page.reload")
            await tab.wait_for(f"{call} && {call}.querySelector('button.approve')")
            left = await tab.evaluate(f"{call}.querySelector('.countdown').textContent")
            assert int(left.split()[0]) <= 118, left

            await tab.evaluate(f"{call}.querySelector('button.approve').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
            assert await tab.evaluate(f"{call}.querySelector('.state').textContent") == "done"
            assert await tab.evaluate(f"{LAST_TURN}.querySelectorAll('.arguments').length") == 1
            shown = await tab.evaluate(f"{LAST_TURN}.innerText")
            assert "Right now in Tokyo it is 9°C, clear." in shown

            # Telemetry lines: shown, then hidden with the header's switch (kept on reload).
            telemetry = "document.querySelectorAll('.telemetry')"
            await tab.wait_for(f"{telemetry}.length > 0")
            visible = f"[...{telemetry}].filter((e) => e.offsetParent !== null).length"
            assert await tab.evaluate(visible) > 0
            await tab.evaluate("document.getElementById('show-telemetry').click()")
            assert await tab.evaluate(visible) == 0
            await tab.send("Page.reload")
            await tab.wait_for(f"{telemetry}.length > 0")
            assert await tab.evaluate(visible) == 0
            assert not await tab.evaluate("document.getElementById('show-telemetry').checked")
            await tab.evaluate("document.getElementById('show-telemetry').click()")

            # A denial: the model says it could not look the weather up.
            await _ask(tab, "And in Lisbon?")
            await tab.wait_for("document.querySelectorAll('section.turn').length === 2")
            await tab.wait_for(f"{call} && !{call}.querySelector('button.deny').disabled")
            await tab.evaluate(f"{call}.querySelector('button.deny').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
            shown = await tab.evaluate(f"{LAST_TURN}.innerText")
            assert "I could not check the weather in Lisbon" in shown
            assert await tab.evaluate(f"{call}.querySelector('.state').textContent") == "error"
            assert tab.console == [], tab.console
        nursery.cancel_scope.cancel()


async def test_an_inner_agents_events_are_nested_in_its_call(browser: Browser) -> None:
    """An agent used as a tool (``agent.as_tool()``): its text and its own tool call show
    inside the card of the call that ran it, indented, in the page and after a reload."""
    inner_text = "Oslo is cold today."
    researcher = (
        AgentBuilder()
        .name("researcher")
        .provider(
            ScriptedProvider(
                [
                    StreamReply(
                        response=reply_tool_calls(("get_weather", {"city": "Oslo"})),
                        chunk_chars=5,
                    ),
                    StreamReply(response=reply_text(inner_text), chunk_chars=4),
                ]
            )
        )
        .tool(get_weather)
        .build()
    )
    writer = (
        AgentBuilder()
        .name("writer")
        .provider(
            ScriptedProvider(
                [
                    StreamReply(
                        response=reply_tool_calls(("researcher", {"input": "Oslo"}), text=INTRO),
                        chunk_chars=5,
                    ),
                    StreamReply(response=reply_text("Wear a coat."), chunk_chars=5),
                ]
            )
        )
        .tool(researcher.as_tool())
        .build()
    )
    outer_card = f"{LAST_TURN}.querySelector('.tool[data-call=\"call_1\"]:not([data-path])')"
    box = f"{outer_card}.querySelector('.nested[data-path=\"call_1\"]')"
    async with open_event_server() as server, open_tab(browser, server.url) as tab:
        await tab.wait_for("document.getElementById('status').textContent === 'live'")
        async with writer, writer.stream([Message.user("Weather?")]) as events:
            async for _ in server.relay(events, prompt="Weather?"):
                pass
        await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
        for _ in range(2):  # as streamed, then as replayed to a page that reloads
            assert await tab.evaluate(f"{box}.querySelector('.assistant-text').textContent") == (
                inner_text
            )
            inner_card = f"{box}.querySelector('.tool[data-path=\"call_1\"]')"
            assert await tab.evaluate(f"{inner_card}.dataset.tool") == "get_weather"
            assert await tab.evaluate(f"{inner_card}.querySelector('.result').textContent") == (
                "-3°C and light snow in Oslo"
            )
            assert await tab.evaluate(f"{outer_card}.querySelector('.state').textContent") == (
                "done"
            )
            # Indented: the box starts to the right of its card's content.
            indent = await tab.evaluate(
                f"{box}.getBoundingClientRect().left - {outer_card}.getBoundingClientRect().left"
            )
            assert indent > 10
            # The outer agent's own text stays at the turn's level.
            assert await tab.evaluate(
                f"[...{LAST_TURN}.children].some((n) => n.textContent === 'Wear a coat.')"
            )
            await tab.send("Page.reload")
            await tab.wait_for(f"{LAST_TURN} && {LAST_TURN}.querySelector('.meta.done')")
        assert tab.console == [], tab.console


async def test_an_inner_agents_approval_is_asked_inside_its_call(browser: Browser) -> None:
    """The page's approval handler on the outer agent also decides the inner agent's calls
    (it has none of its own): that question shows inside the card of the call that ran it."""
    researcher = (
        AgentBuilder()
        .name("researcher")
        .provider(
            ScriptedProvider(
                [reply_tool_calls(("get_weather", {"city": "Oslo"})), reply_text("Cold.")]
            )
        )
        .tool(get_weather)
        .build()
    )
    box = f"{LAST_TURN}.querySelector('.nested[data-path=\"call_1\"]')"
    async with open_event_server() as server, open_tab(browser, server.url) as tab:
        await tab.wait_for("document.getElementById('status').textContent === 'live'")
        writer = (
            AgentBuilder()
            .name("writer")
            .provider(
                ScriptedProvider(
                    [reply_tool_calls(("researcher", {"input": "Oslo"})), reply_text("Coat.")]
                )
            )
            .tool(researcher.as_tool())
            .approval_handler(server.approval_handler(timeout=120))
            .build()
        )

        async def turn() -> None:
            async with writer, writer.stream([Message.user("Weather?")]) as events:
                async for _ in server.relay(events, prompt="Weather?"):
                    pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn)
            outer = "document.querySelector('[data-approval]:not([data-path]) button.approve')"
            await tab.wait_for(outer)
            await tab.evaluate(f"{outer}.click()")
            inner = f"({box} && {box}.querySelector('[data-approval][data-path=\"call_1\"]'))"
            await tab.wait_for(f"{inner} && !{inner}.querySelector('button.approve').disabled")
            assert await tab.evaluate(f"{inner}.dataset.tool") == "get_weather"
            await tab.evaluate(f"{inner}.querySelector('button.approve').click()")
            await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
        assert await tab.evaluate(f"{box}.querySelector('.result').textContent") == (
            "-3°C and light snow in Oslo"
        )
        assert tab.console == [], tab.console


async def test_a_prompts_attachments_show_under_it_in_chromium(browser: Browser) -> None:
    from kova import Document, Image, Text

    prompt = Message.user(
        [
            Text(text="Does the invoice match?"),
            Document(data=b"%PDF-1.7", title="invoice.pdf"),
            Image(url="https://example.com/receipt.png"),
        ]
    )
    async with open_event_server() as server, open_tab(browser, server.url) as tab:
        await tab.wait_for("document.getElementById('status').textContent === 'live'")
        agent = AgentBuilder().provider(ScriptedProvider([reply_text("It does.")])).build()
        async with agent, agent.stream([prompt]) as events:
            async for _ in server.relay(events, prompt=prompt):
                pass
        await tab.wait_for(f"{LAST_TURN}.querySelector('.meta.done')")
        chips = await tab.evaluate(
            f"Array.from({LAST_TURN}.querySelectorAll('.user .attachment'))"
            ".map((n) => n.textContent).join('|')"
        )
        user = await tab.evaluate(f"{LAST_TURN}.querySelector('.user').innerText")
    assert chips == "invoice.pdf (application/pdf)|image (by URL)"
    assert "Does the invoice match?" in user
