"""``kova serve``'s one port: the web view (page, WebSocket, approvals) and the
OpenAI-compatible API on the same Hypercorn-served app, with one token; the web view's host,
origin and token checks hold there as on its own port. (The page itself, in Chromium, is
tested in tests/web/test_browser.py through the same ``serve_chat``.)"""

from __future__ import annotations

from functools import partial

import httpx2
import openai
import pytest
import trio
import trio_websocket

from kova.cli._serve import serve_chat
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

from ._agents import get_weather
from ._page import open_page

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'openai.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
]

TOKEN = "kova-serve-test-token-42"


class _Hosted:
    """What the tests need of a page's server: its WebSocket URL and port."""

    def __init__(self, url: str) -> None:
        self.port = int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.websocket_url = f"ws://127.0.0.1:{self.port}/ws?token={TOKEN}"


async def test_the_api_and_the_page_share_one_port_and_one_token() -> None:
    lines: list[str] = []
    provider = ScriptedProvider(
        [reply_tool_calls(("get_weather", {"city": "Oslo"})), reply_text("Snow in Oslo.")]
    )
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            partial(serve_chat, provider, tools=[get_weather], token=TOKEN, out=lines.append)
        )
        assert url.endswith(f"#token={TOKEN}")
        base = url.split("#")[0].rstrip("/")
        hosted = _Hosted(url)
        async with open_page(hosted.websocket_url) as page:
            assert page.events[0]["type"] == "hello"
            async with openai.AsyncOpenAI(base_url=base + "/v1", api_key=TOKEN) as client:
                async with trio.open_nursery() as asking:
                    answers: list[str] = []

                    async def ask() -> None:
                        answer = await client.chat.completions.create(
                            model="kova", messages=[{"role": "user", "content": "Oslo?"}]
                        )
                        answers.append(answer.choices[0].message.content or "")

                    asking.start_soon(ask)
                    # The API client's tool call waits for a person on the page.
                    asked = await page.wait_for("approval_requested")
                    await page.send(
                        {"v": 1, "type": "decision", "id": asked["id"], "approve": True}
                    )
            assert answers == ["Snow in Oslo."]
        async with httpx2.AsyncClient() as plain:
            refused = await plain.get(base + "/v1/models")
        nursery.cancel_scope.cancel()
    assert refused.status_code == 401
    assert any("OpenAI-compatible API at" in line for line in lines)


async def test_the_web_views_checks_hold_on_the_app() -> None:
    provider = ScriptedProvider([reply_text("unused")])
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_chat, provider, token=TOKEN, out=lambda line: None))
        hosted = _Hosted(url)
        base = f"ws://127.0.0.1:{hosted.port}/ws"
        for ws_url, headers, host in [
            (f"{base}?token=wrong-token-wrong-token", None, None),
            (base, None, None),
            (hosted.websocket_url, [(b"Origin", b"http://evil.example")], None),
            (hosted.websocket_url, None, "evil.example"),  # DNS rebinding
        ]:
            with pytest.raises(trio_websocket.HandshakeError) as rejected:
                async with open_page(ws_url, headers=headers, host=host):
                    pass
            assert isinstance(rejected.value, trio_websocket.ConnectionRejected)
            assert rejected.value.status_code == 403
        same_origin = [(b"Origin", f"http://127.0.0.1:{hosted.port}".encode())]
        async with open_page(hosted.websocket_url, headers=same_origin) as accepted:
            assert accepted.events[0]["type"] == "hello"
        async with httpx2.AsyncClient() as client:
            page = await client.get(f"http://127.0.0.1:{hosted.port}/")
            foreign = await client.get(
                f"http://127.0.0.1:{hosted.port}/", headers={"host": "evil.example"}
            )
        nursery.cancel_scope.cancel()
    assert page.status_code == 200
    assert b"<title>kova</title>" in page.content
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    assert foreign.status_code == 403


async def test_a_short_token_is_refused() -> None:
    from kova.cli._errors import CliError

    with pytest.raises(CliError, match="at least 16"):
        await serve_chat(ScriptedProvider([]), token="short", out=lambda line: None)
