"""kova.web's event server over real WebSockets on loopback: schema, approvals, security,
reconnects and slow pages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio_websocket

from kova import Message, TextDelta, ToolAnnotations, ToolResult
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool
from kova.web import PROTOCOL_VERSION, EventServer, WebRequest, open_event_server

from ._client import open_page

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kova.agent import AgentEvent, AgentResponse

WEATHER = ToolAnnotations(read_only=True, title="Weather lookup")


@tool
def get_weather(city: str) -> str:
    """Current weather.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def _script(answer: str = "It is sunny in Oslo.") -> ScriptedProvider:
    return ScriptedProvider(
        [
            StreamReply(
                response=reply_tool_calls(("get_weather", {"city": "Oslo"}), text="Checking. "),
                chunk_chars=4,
            ),
            StreamReply(response=reply_text(answer), chunk_chars=4),
        ]
    )


async def _turn(
    server: EventServer, provider: ScriptedProvider, *, approval: bool = True, prompt: str = "hi"
) -> AgentResponse:
    builder = AgentBuilder().provider(provider).tool(get_weather)
    if approval:
        builder = builder.approval_handler(
            server.approval_handler(tools=[get_weather], annotations={"get_weather": WEATHER})
        )
    async with builder.build() as agent, agent.stream([Message.user(prompt)]) as events:
        response = None
        async for event in server.relay(events, prompt=prompt):
            if hasattr(event, "response"):
                response = event.response  # type: ignore[attr-defined]
        assert response is not None
        return response  # type: ignore[no-any-return]


async def test_a_streamed_turn_reaches_the_page_in_order() -> None:
    provider = ScriptedProvider(
        [StreamReply(response=reply_text("Hello there, world"), chunk_chars=3)]
    )
    async with open_event_server() as server, open_page(server) as page:
        hello = page.events[0]
        assert hello["type"] == "hello"
        assert hello["replay"] == []
        assert hello["chat"] is False
        await _turn(server, provider, approval=False)
        done = await page.wait_for("turn_completed")
    kinds = [event["type"] for event in page.events]
    assert kinds[:2] == ["hello", "turn_started"]
    assert kinds[-1] == "turn_completed"
    assert page.of_type("turn_started")[0]["prompt"] == "hi"
    assert page.text() == "Hello there, world"
    assert len(page.of_type("text")) == 6  # every delta, not a summary
    assert done["text"] == "Hello there, world"
    assert done["stop_reason"] == "end_turn"
    assert done["usage"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    assert done["llm_calls"] == 1
    assert done["duration_s"] >= done["first_delta_s"] >= 0


async def test_approve_from_the_page_runs_the_tool_and_resumes_the_turn() -> None:
    provider = _script()
    async with open_event_server() as server, open_page(server) as page, trio.open_nursery() as n:
        result: list[AgentResponse] = []

        async def turn() -> None:
            result.append(await _turn(server, provider))

        n.start_soon(turn)
        asked = await page.wait_for("approval_requested")
        assert asked["tool"] == "get_weather"
        assert asked["arguments"] == {"city": "Oslo"}
        assert asked["call_id"] == "call_1"
        assert asked["annotations"]["read_only"] is True
        assert asked["annotations"]["title"] == "Weather lookup"
        assert server.pending_approvals == 1
        await page.send({"v": 1, "type": "decision", "id": asked["id"], "approve": True})
        await page.wait_for("turn_completed")
    decided = page.of_type("approval_decided")
    assert decided == [
        {
            "type": "approval_decided",
            "id": asked["id"],
            "approved": True,
            "reason": None,
            "by": "page",
        }
    ]
    finished = page.of_type("tool_finished")[0]
    assert finished["result"] == "sunny in Oslo"
    assert finished["is_error"] is False
    assert result[0].text == "It is sunny in Oslo."
    assert page.text() == "Checking. It is sunny in Oslo."


async def test_deny_from_the_page_reaches_the_model_in_band_with_the_reason() -> None:
    provider = _script("Understood, I will not look.")
    async with open_event_server() as server, open_page(server) as page, trio.open_nursery() as n:
        n.start_soon(_turn, server, provider)
        asked = await page.wait_for("approval_requested")
        await page.send(
            {"v": 1, "type": "decision", "id": asked["id"], "approve": False, "reason": "not now"}
        )
        await page.wait_for("turn_completed")
    finished = page.of_type("tool_finished")[0]
    assert finished["is_error"] is True
    assert finished["result"] == "tool call denied: the person on the web page said: not now"
    second = provider.requests[1].messages[-1]
    denial = next(block for block in second.content if isinstance(block, ToolResult))
    assert denial.is_error
    assert "not now" in denial.text


async def test_first_answer_wins_and_every_page_sees_it_decided() -> None:
    async with (
        open_event_server() as server,
        open_page(server) as first,
        open_page(server) as second,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_turn, server, _script())
        asked = await second.wait_for("approval_requested")
        await first.send({"v": 1, "type": "decision", "id": asked["id"], "approve": True})
        await second.wait_for("approval_decided")
        await second.send({"v": 1, "type": "decision", "id": asked["id"], "approve": False})
        await first.wait_for("turn_completed")
        await second.wait_for("turn_completed")
    for page in (first, second):
        decided = page.of_type("approval_decided")
        assert len(decided) == 1
        assert decided[0]["approved"] is True
        assert page.of_type("tool_finished")[0]["is_error"] is False


async def test_no_answer_within_the_timeout_denies(autojump_clock: trio.testing.MockClock) -> None:
    async with open_event_server() as server, open_page(server) as page:
        handler = server.approval_handler(timeout=30)
        started = trio.current_time()
        outcome = await handler.approve(_call())
        assert outcome == "no decision within 30 s"
        assert 30 <= trio.current_time() - started < 31
        decided = await page.wait_for("approval_decided")
        assert decided["by"] == "timeout"
    assert server.pending_approvals == 0


async def test_a_page_that_leaves_does_not_leave_the_call_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_event_server(disconnect_grace=5) as server:
        outcome: list[bool | str] = []
        async with trio.open_nursery() as nursery:
            async with open_page(server) as page:

                async def ask() -> None:
                    outcome.append(await server.approval_handler(timeout=3600).approve(_call()))

                nursery.start_soon(ask)
                await page.wait_for("approval_requested")
            started = trio.current_time()
        assert outcome == ["no page is connected to decide"]
        assert trio.current_time() - started < 10  # the grace, not the hour
        assert server.pending_approvals == 0


async def test_a_page_that_comes_back_within_the_grace_can_still_decide(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_event_server(disconnect_grace=5) as server:
        outcome: list[bool | str] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                outcome.append(await server.approval_handler(timeout=3600).approve(_call()))

            nursery.start_soon(ask)
            await trio.sleep(1)  # asked while no page is connected
            async with open_page(server) as page:
                replayed = [e["type"] for e in page.events[0]["replay"]]
                assert "approval_requested" in replayed
                pending = next(
                    e for e in page.events[0]["replay"] if e["type"] == "approval_requested"
                )
                await page.send({"v": 1, "type": "decision", "id": pending["id"], "approve": True})
                await page.wait_for("approval_decided")
        assert outcome == [True]


async def test_a_reconnecting_page_gets_the_current_turn() -> None:
    async with open_event_server() as server, trio.open_nursery() as nursery:
        async with open_page(server) as first:
            nursery.start_soon(_turn, server, _script())
            await first.wait_for("approval_requested")
        async with open_page(server) as again:
            replay = again.events[0]["replay"]
            kinds = [event["type"] for event in replay]
            assert kinds[:2] == ["turn_started", "text"]
            # The pool asks before the stream hands over ToolCallStarted: either order.
            assert sorted(kinds[2:]) == ["approval_requested", "tool_started"]
            assert replay[1]["text"] == "Checking. "  # the deltas so far, joined
            asked = next(e for e in replay if e["type"] == "approval_requested")
            await again.send({"v": 1, "type": "decision", "id": asked["id"], "approve": True})
            await again.wait_for("turn_completed")
        async with open_page(server) as later:
            replay = later.events[0]["replay"]
            assert replay[-1]["type"] == "turn_completed"
            assert "".join(e["text"] for e in replay if e["type"] == "text") == (
                "Checking. It is sunny in Oslo."
            )


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"v": 2, "type": "chat", "text": "x"}', "version"),
        ('{"v": 1, "type": "launch"}', "unknown message type"),
        ('{"v": 1, "type": "decision", "id": "a1", "approve": "yes"}', "'approve'"),
        ('{"v": 1, "type": "decision", "id": 7, "approve": true}', "'id'"),
        ('{"v": 1, "type": "chat", "text": "x", "extra": 1}', "unexpected fields"),
        ('{"v": 1, "type": "chat", "text": "   "}', "empty"),
        ('{"v": true, "type": "chat", "text": "x"}', "version"),
        ('{"v": 1, "type": "stop", "turn": "1"}', "'turn'"),
        ('{"v": 1, "type": "stop", "now": true}', "unexpected fields"),
    ],
)
async def test_a_malformed_message_closes_that_page_only(message: str, why: str) -> None:
    async with open_event_server() as server, open_page(server) as bad, open_page(server) as good:
        await bad.send(message)
        closed = await bad.wait_closed()
        assert closed.reason is not None
        assert closed.reason.code == 1008
        assert why in (closed.reason.reason or "")
        server.publish(_delta("still here"))
        await good.wait_for("text", text="still here")
        assert server.page_count == 1


async def test_an_oversized_message_closes_that_page_only() -> None:
    async with (
        open_event_server(max_message_bytes=1024) as server,
        open_page(server) as bad,
        open_page(server) as good,
    ):
        await bad.send(json.dumps({"v": 1, "type": "chat", "text": "x" * 5000}))
        closed = await bad.wait_closed()
        assert closed.reason is not None
        assert closed.reason.code == 1009  # message too big
        server.publish(_delta("fine"))
        await good.wait_for("text", text="fine")


async def test_a_wrong_token_a_foreign_origin_and_a_foreign_host_are_refused() -> None:
    async with open_event_server() as server:
        base = f"ws://127.0.0.1:{server.port}/ws"
        for url, headers in [
            (f"{base}?token=wrong-token-wrong-token", None),
            (base, None),
            (server.websocket_url, [(b"Origin", b"http://evil.example")]),
        ]:
            with pytest.raises(trio_websocket.HandshakeError) as refused:
                async with open_page(server, url=url, headers=headers):
                    pass
            assert isinstance(refused.value, trio_websocket.ConnectionRejected)
            assert refused.value.status_code == 403
        same_origin = [(b"Origin", f"http://127.0.0.1:{server.port}".encode())]
        async with open_page(server, headers=same_origin) as page:
            assert page.events[0]["type"] == "hello"


async def test_an_allowed_origin_may_connect_and_others_may_not() -> None:
    async with open_event_server(allowed_origins=["http://app.example:8080"]) as server:
        async with open_page(server, headers=[(b"Origin", b"http://app.example:8080")]) as page:
            assert page.events[0]["type"] == "hello"
        with pytest.raises(trio_websocket.HandshakeError):
            async with open_page(server, headers=[(b"Origin", b"http://app.example:9090")]):
                pass


async def test_a_host_supplied_check_replaces_the_token() -> None:
    seen: list[WebRequest] = []

    def authorize(request: WebRequest) -> bool:
        seen.append(request)
        return request.query.get("ticket") == ["letmein"]

    async with open_event_server(authorize=authorize) as server:
        base = f"ws://127.0.0.1:{server.port}/ws"
        async with open_page(server, url=f"{base}?ticket=letmein"):
            pass
        with pytest.raises(trio_websocket.ConnectionRejected):
            async with open_page(server, url=server.websocket_url):
                pass
    assert seen[0].path == "/ws"


async def test_the_page_is_served_with_a_strict_policy() -> None:
    async with open_event_server() as server:
        status, headers, body = await _get(server.port, "/")
        assert status == 200
        assert b"<title>kova</title>" in body
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["referrer-policy"] == "no-referrer"
        for path in ("/page.js", "/page.css"):
            assert (await _get(server.port, path))[0] == 200
        assert (await _get(server.port, "/secret"))[0] == 404
        assert (await _get(server.port, "/", host="evil.example:80"))[0] == 403
        assert (await _get(server.port, "/", method="POST"))[0] == 405
        assert (await _get(server.port, "/", raw=b"\x00garbage\r\n\r\n"))[0] == 400
    assert server.url.startswith(f"http://127.0.0.1:{server.port}/#token=")
    assert server.url.endswith(server.token)


async def test_a_slow_page_is_dropped_and_the_agent_never_waits() -> None:
    async with (
        open_event_server(page_buffer=8, flush_interval=5) as server,
        open_page(server) as slow,
    ):
        for number in range(20):  # no checkpoint in between: the page cannot drain
            server.publish(_delta(str(number)))
        assert server.dropped_pages == 1
        assert server.max_buffered == 8
        closed = await slow.wait_closed()
        assert closed.reason is not None
        assert closed.reason.code == 1013
        async with open_page(server) as again:  # and it catches up on reconnecting
            replay = again.events[0]["replay"]
            assert "".join(e["text"] for e in replay if e["type"] == "text") == "".join(
                str(n) for n in range(20)
            )


async def test_prompts_from_the_page() -> None:
    async with open_event_server(chat=True) as server, open_page(server) as page:
        assert page.events[0]["chat"] is True
        await page.send({"v": PROTOCOL_VERSION, "type": "chat", "text": "hello agent"})
        assert await server.prompts.receive() == "hello agent"
    async with open_event_server() as server, open_page(server) as page:
        await page.send({"v": 1, "type": "chat", "text": "anyone?"})
        error = await page.wait_for("error")
        assert "does not take prompts" in error["message"]
        with pytest.raises(RuntimeError, match="chat=True"):
            server.prompts  # noqa: B018


async def test_a_turn_that_fails_ends_failed_on_the_page() -> None:
    async def broken() -> Any:
        yield _delta("partial ")
        raise ValueError("provider exploded")

    async with open_event_server() as server, open_page(server) as page:
        with pytest.raises(ValueError, match="exploded"):
            async for _ in server.relay(broken(), prompt="go"):
                pass
        failed = await page.wait_for("turn_failed")
    assert failed["error"] == "ValueError: provider exploded"
    assert page.text() == "partial "


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("page_buffer", 0),
        ("max_pages", True),
        ("flush_interval", -1),
        ("disconnect_grace", 0),
        ("token", "short"),
    ],
)
async def test_options_are_checked(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option):
        async with open_event_server(**{option: value}):  # type: ignore[arg-type]
            pass


async def test_approval_timeout_is_checked() -> None:
    async with open_event_server() as server:
        for bad in (0, -1, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="timeout"):
                server.approval_handler(timeout=bad)


def _call() -> Any:
    from kova import ToolUse

    return ToolUse(id="call_x", name="get_weather", input={"city": "Oslo"})


def _delta(text: str) -> Any:
    from kova import TextDelta

    return TextDelta(text=text)


async def _get(
    port: int, path: str, *, host: str | None = None, method: str = "GET", raw: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        request = raw or (
            (
                f"{method} {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
                "Connection: close\r\n\r\n"  # or the server keeps it open its keep-alive time
            ).encode()
        )
        await stream.send_all(request)
        data = b""
        while chunk := await stream.receive_some():
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    return int(lines[0].split()[1]), headers, body


async def test_telemetry_reaches_the_page(autojump_clock: trio.testing.MockClock) -> None:
    from kova.testing import ErrorReply

    provider = ScriptedProvider(
        [
            ErrorReply(status_code=529),
            StreamReply(
                response=reply_tool_calls(("get_weather", {"city": "Oslo"})), chunk_chars=4
            ),
            StreamReply(response=reply_text("Sunny."), chunk_chars=4),
        ]
    )
    async with open_event_server() as server, open_page(server) as page:
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            with agent.telemetry.subscribe(server):
                async with agent.stream([Message.user("hi")]) as events:
                    async for _ in server.relay(events, prompt="hi"):
                        pass
        await page.wait_for("turn_completed")
    shown = page.of_type("telemetry")
    kinds = [event["kind"] for event in shown]
    assert kinds.count("retry") == 1
    assert kinds.count("model_call") == 2  # the retried call counts once, then the answer
    assert kinds.count("tool") == 1
    assert "first_token" in kinds
    retry = next(event for event in shown if event["kind"] == "retry")
    assert retry["attempt"] == 1
    assert retry["turn"] == 1
    assert retry["wait_s"] > 0
    assert retry["summary"].startswith("retry 1 after")
    tool_event = next(event for event in shown if event["kind"] == "tool")
    assert tool_event["tool"] == "get_weather"
    assert tool_event["outcome"] == "success"
    finished = [event for event in shown if event["kind"] == "model_call"]
    assert finished[-1]["outcome"] == "ok"
    assert finished[-1]["usage"]["total_tokens"] == 15


async def test_a_reconnecting_page_is_told_the_time_left_to_decide(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_event_server(disconnect_grace=60) as server, trio.open_nursery() as nursery:
        async with open_page(server) as first:
            nursery.start_soon(server.approval_handler(timeout=120).approve, _call())
            asked = await first.wait_for("approval_requested")
            assert (asked["timeout_s"], asked["remaining_s"]) == (120, 120)
        await trio.sleep(30)
        async with open_page(server) as again:
            replayed = next(
                e for e in again.events[0]["replay"] if e["type"] == "approval_requested"
            )
            assert replayed["timeout_s"] == 120
            assert 89 < replayed["remaining_s"] <= 90  # the server's deadline, not a new clock
        nursery.cancel_scope.cancel()


async def _stalling() -> AsyncIterator[AgentEvent]:
    yield TextDelta(text="partial")
    await trio.sleep_forever()


async def test_stop_from_the_page_cancels_the_stoppable_turn() -> None:
    stopped: list[bool] = []
    async with open_event_server(chat=True) as server, open_page(server) as page:
        await page.send({"v": 1, "type": "stop"})
        assert (await page.wait_for("error"))["message"] == "no turn is running"

        async def turn() -> None:
            with server.stoppable() as scope:
                async for _ in server.relay(_stalling(), prompt="go on"):
                    pass
            stopped.append(scope.cancelled_caught)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn)
            started = await page.wait_for("turn_started")
            await page.wait_for("text", text="partial")
            await page.send({"v": 1, "type": "stop", "turn": started["turn"] - 1})  # a late press
            await page.send({"v": 1, "type": "stop", "turn": started["turn"]})
            failed = await page.wait_for("turn_failed")
        assert failed["error"] == "stopped"
        assert stopped == [True]
        with server.stoppable(), pytest.raises(RuntimeError, match="one at a time"):
            with server.stoppable():
                pass


async def test_a_prompt_message_shows_its_attachments_on_the_page() -> None:
    from kova import Audio, Document, File, Image, Text

    prompt = Message.user(
        [
            Text(text="What does the invoice say?"),
            Document(data=b"%PDF-1.7", title="invoice.pdf"),
            Document.from_text("notes"),
            Image(url="https://example.com/cat.png"),
            Audio(data=b"RIFF"),
            File("file-abc"),
        ]
    )
    provider = ScriptedProvider([reply_text("It says 1,240.00 EUR.")])
    async with open_event_server() as server, open_page(server) as page:
        async with (
            AgentBuilder().provider(provider).build() as agent,
            agent.stream([prompt]) as events,
        ):
            async for _ in server.relay(events, prompt=prompt):
                pass
        await page.wait_for("turn_completed")
        async with open_page(server) as later:  # a page that connects later gets it replayed
            replayed = [e for e in later.events[0]["replay"] if e["type"] == "turn_started"]
    started = page.of_type("turn_started")[0]
    assert started["prompt"] == "What does the invoice say?"
    assert started["attachments"] == [
        "invoice.pdf (application/pdf)",
        "document (text/plain)",
        "image (by URL)",
        "audio (wav)",
        "file file-abc",
    ]
    assert replayed == [started]


async def test_a_priced_turn_shows_its_cost_on_the_page() -> None:
    from kova.agent import Prices

    provider = ScriptedProvider([reply_text("Hello")])
    builder = (
        AgentBuilder().provider(provider).prices(Prices({"scripted": {"input": 1, "output": 2}}))
    )
    async with open_event_server() as server, open_page(server) as page:
        async with builder.build() as agent, agent.stream([Message.user("hi")]) as events:
            async for _ in server.relay(events, prompt="hi"):
                pass
        done = await page.wait_for("turn_completed")
    # 10 tokens in at $1 and 5 out at $2 per million: exact, as a string.
    assert done["usage"]["cost"] == "0.00002"


async def test_a_connecting_page_is_replayed_only_the_turns_kept() -> None:
    async with open_event_server(keep_turns=2) as server:
        for number in range(1, 4):
            server.begin_turn(f"prompt {number}")
            server.fail_turn("done")
        async with open_page(server) as page:
            replay = page.events[0]["replay"]
    started = [event["prompt"] for event in replay if event["type"] == "turn_started"]
    assert started == ["prompt 2", "prompt 3"]
