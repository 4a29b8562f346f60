"""The fake Anthropic server's wire shape, read with a plain HTTP client (no kova provider)."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from kova import _models as m
from kova.providers._sse import SseDecoder
from kova.testing import ErrorReply, Script, StreamReply, open_anthropic_server

HEADERS = {"anthropic-version": "2026-10-21", "authorization": "Bearer k"}
BODY: dict[str, Any] = {
    "model": "claude-opus-4-8",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}
RESPONSE = m.ModelResponse(
    content=(
        m.Thinking(text="think", signature="sig"),
        m.RedactedThinking(data="opaque"),
        m.Text(text="hello"),
        m.ToolUse(id="toolu_1", name="f", input={"a": 1}),
    ),
    stop_reason=m.StopReason.TOOL_USE,
    usage=m.Usage(input_tokens=30, output_tokens=7, cache_read_tokens=20),
)


async def test_stream_has_every_event_type_in_the_real_order() -> None:
    async with (
        open_anthropic_server(Script([StreamReply(response=RESPONSE)]), api_key="k") as server,
        httpx2.AsyncClient() as client,
    ):
        response = await client.post(
            f"{server.base_url}/v1/messages", json={**BODY, "stream": True}, headers=HEADERS
        )
    assert response.headers["content-type"] == "text/event-stream"
    events = SseDecoder().feed(response.text)
    names = [event.event for event in events]
    for event in events:
        assert json.loads(event.data)["type"] == event.event
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    assert set(names) == {
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
    payloads = [json.loads(event.data) for event in events]
    starts = [p["content_block"]["type"] for p in payloads if p["type"] == "content_block_start"]
    assert starts == ["thinking", "redacted_thinking", "text", "tool_use"]
    deltas = {p["delta"]["type"] for p in payloads if p["type"] == "content_block_delta"}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    indexes = [p["index"] for p in payloads if p["type"] == "content_block_stop"]
    assert indexes == [0, 1, 2, 3]
    start_usage = payloads[0]["message"]["usage"]
    assert start_usage["input_tokens"] == 10  # uncached part; kova's 30 includes the cache
    assert start_usage["cache_read_input_tokens"] == 20
    assert payloads[-2]["usage"]["output_tokens"] == 7
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"


async def test_json_message_and_error_shapes() -> None:
    script = Script([RESPONSE, ErrorReply(status_code=429, message="slow down", retry_after=3)])
    async with (
        open_anthropic_server(script) as server,
        httpx2.AsyncClient() as client,
    ):
        ok = await client.post(f"{server.base_url}/v1/messages", json=BODY, headers=HEADERS)
        limited = await client.post(f"{server.base_url}/v1/messages", json=BODY, headers=HEADERS)
        no_version = await client.post(f"{server.base_url}/v1/messages", json=BODY)
        missing = await client.post(
            f"{server.base_url}/v1/messages", json={"model": "x"}, headers=HEADERS
        )
    message = ok.json()
    assert message["type"] == "message"
    assert [block["type"] for block in message["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
    ]
    assert message["content"][0]["signature"] == "sig"
    assert message["stop_reason"] == "tool_use"
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "3"
    assert limited.json() == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
        "request_id": "req_fake",
    }
    assert no_version.status_code == 400
    assert missing.status_code == 400
    assert missing.json()["error"]["type"] == "invalid_request_error"


async def test_malformed_messages_are_a_400_not_a_crash() -> None:
    bad = {**BODY, "messages": [{"role": "wizard", "content": "hi"}]}
    async with (
        open_anthropic_server(Script([])) as server,
        httpx2.AsyncClient() as client,
    ):
        response = await client.post(f"{server.base_url}/v1/messages", json=bad, headers=HEADERS)
        counted = await client.post(
            f"{server.base_url}/v1/messages/count_tokens",
            json={"model": "x", "messages": bad["messages"]},
            headers=HEADERS,
        )
    assert response.status_code == counted.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
