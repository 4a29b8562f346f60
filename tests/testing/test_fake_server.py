"""The plumbing the five fake servers share: how a scripted reply becomes a streamed body."""

from __future__ import annotations

import inspect
import socket
from typing import Any

import attrs
import httpx2
import pytest
import trio

from kova import StopReason, TextDelta
from kova.providers import ErrorEvent, StopEvent, StreamEvent
from kova.testing import (
    FakeAnthropicServer,
    FakeBedrockServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAiServer,
    FakeResponsesServer,
    Script,
    StreamReply,
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    open_responses_server,
    reply_text,
)
from kova.testing._bedrock_server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY
from kova.testing._fake_server import FakeServer, scripted_stream

EVENTS: tuple[StreamEvent, ...] = (
    TextDelta(text="a"),
    TextDelta(text="b"),
    StopEvent(stop_reason=StopReason.END_TURN),
)
WITH_ERROR: tuple[StreamEvent, ...] = (
    TextDelta(text="a"),
    ErrorEvent(message="melted", error_type="server_error"),
    TextDelta(text="never"),
)


class Letters:
    """An encoder that writes each event's text (or its type) as one chunk."""

    def start(self) -> bytes:
        return b"<"

    def encode(self, event: StreamEvent) -> bytes:
        return getattr(event, "text", type(event).__name__).encode()

    def finish(self) -> bytes:
        return b">"


@attrs.frozen(kw_only=True)
class Case:
    events: tuple[StreamEvent, ...]
    cut_after: int | None = None
    hold_after: int | None = None
    hold: bool = False
    chunks: list[bytes]
    cut: bool = False
    held: bool = False


CASES = [
    Case(events=EVENTS, chunks=[b"<", b"a", b"b", b"StopEvent", b">"]),
    Case(events=EVENTS, cut_after=2, chunks=[b"<", b"a", b"b"], cut=True),
    Case(events=EVENTS, cut_after=3, chunks=[b"<", b"a", b"b", b"StopEvent"], cut=True),
    # An error event ends the body there, properly, whatever cut point lies beyond it.
    Case(events=WITH_ERROR, chunks=[b"<", b"a", b"ErrorEvent"]),
    Case(events=WITH_ERROR, cut_after=3, chunks=[b"<", b"a", b"ErrorEvent"]),
    # hold_after counts only for the fakes that hold (OpenAI, Anthropic, Gemini, Ollama).
    Case(events=EVENTS, hold_after=1, hold=True, chunks=[b"<", b"a"], cut=True, held=True),
    Case(events=EVENTS, hold_after=1, chunks=[b"<", b"a", b"b", b"StopEvent", b">"]),
]


@pytest.mark.parametrize("case", CASES)
def test_a_scripted_stream_is_cut_held_or_ended_as_the_reply_says(case: Case) -> None:
    reply = StreamReply(
        response=reply_text("unused"),
        events=case.events,
        cut_after=case.cut_after,
        hold_after=case.hold_after,
    )
    stream = scripted_stream(reply, Letters(), headers={}, hold=case.hold)
    assert list(stream.chunks) == case.chunks  # type: ignore[arg-type]
    assert (stream.cut, stream.hold) == (case.cut, case.held)


@pytest.mark.parametrize(
    "server_type",
    [
        FakeAnthropicServer,
        FakeBedrockServer,
        FakeGeminiServer,
        FakeOllamaServer,
        FakeOpenAiServer,
        FakeResponsesServer,
    ],
)
async def test_a_fake_server_is_state_it_records_and_shows_briefly(
    server_type: type[FakeServer],
) -> None:
    # The script goes first, by position or keyword, and becomes a Script.
    server = server_type([reply_text("hi")])  # type: ignore[call-arg]
    assert isinstance(server.script, Script)  # type: ignore[attr-defined]
    assert repr(server) == f"{server_type.__name__}(not serving, 0 requests)"
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.serve)
        async with httpx2.AsyncClient() as client:
            await client.get(f"{url}/nowhere")
        assert repr(server) == f"{server_type.__name__}({url}, 1 requests)"
        nursery.cancel_scope.cancel()
    assert server.requests[0].path == "/nowhere"
    with pytest.raises(AttributeError):
        server.surprise = 1  # type: ignore[attr-defined]  # slotted: a typo fails loudly


def test_fake_servers_keep_their_keywords_and_defaults() -> None:
    bedrock = FakeBedrockServer(script=[], region="eu-west-1")
    assert bedrock.region == "eu-west-1"
    assert bedrock.access_keys == {FAKE_ACCESS_KEY_ID: FAKE_SECRET_ACCESS_KEY}
    assert bedrock.access_keys is not FakeBedrockServer([]).access_keys
    assert FakeBedrockServer([]).session_tokens == {}
    openai = FakeOpenAiServer([], "gpt-x", reverse_embeddings=True)
    assert (openai.model, openai.reverse_embeddings) == ("gpt-x", True)
    assert openai.embedding_input_limit == 2048


OPENERS = [
    (open_anthropic_server, FakeAnthropicServer),
    (open_bedrock_server, FakeBedrockServer),
    (open_gemini_server, FakeGeminiServer),
    (open_ollama_server, FakeOllamaServer),
    (open_openai_server, FakeOpenAiServer),
    (open_responses_server, FakeResponsesServer),
]


@pytest.mark.parametrize(("opener", "server_type"), OPENERS, ids=[t.__name__ for _, t in OPENERS])
async def test_every_open_server_takes_its_class_arguments_and_serves_where_told(
    opener: Any, server_type: type[FakeServer]
) -> None:
    assert inspect.signature(opener).parameters == inspect.signature(server_type).parameters
    assert opener.__name__ in opener.__doc__
    assert server_type.__name__ in opener.__doc__
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with opener([reply_text("hi")], models=(), host="127.0.0.1", port=port) as server:
        assert isinstance(server, server_type)
        assert server.base_url == f"http://127.0.0.1:{port}"
        assert (server.models, server.host, server.port) == ((), "127.0.0.1", port)


EXHAUSTED = [
    (FakeOpenAiServer([]), "/v1/chat/completions", {"model": "m", "messages": []}),
    (FakeResponsesServer([]), "/v1/responses", {"model": "m", "input": "hi"}),
    (
        FakeAnthropicServer([]),
        "/v1/messages",
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    ),
    (FakeGeminiServer([]), "/v1beta/models/m:generateContent", {"contents": []}),
    (FakeOllamaServer([]), "/api/chat", {"model": "m", "messages": [], "stream": False}),
    (FakeBedrockServer([], api_key="k"), "/model/m/converse", {"messages": []}),
]


@pytest.mark.parametrize(
    ("server", "path", "body"), EXHAUSTED, ids=[type(s).__name__ for s, _, _ in EXHAUSTED]
)
async def test_every_fake_answers_a_request_beyond_its_script_with_a_500(
    server: FakeServer, path: str, body: dict[str, object]
) -> None:
    headers = {"anthropic-version": "2023-06-01", "authorization": "Bearer k"}
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.serve)
        async with httpx2.AsyncClient() as client:
            answer = await client.post(f"{url}{path}", json=body, headers=headers)
        nursery.cancel_scope.cancel()
    assert answer.status_code == 500
    assert "script" in answer.text


async def test_the_fake_openai_server_answers_whole_bodies_as_200_json() -> None:
    async with open_openai_server(Script([reply_text("hi")])) as server:
        async with httpx2.AsyncClient(base_url=server.base_url) as client:
            chat = await client.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "q"}]},
            )
            vectors = await client.post("/v1/embeddings", json={"model": "e", "input": ["a"]})
    for answer in (chat, vectors):
        assert (answer.status_code, answer.headers["content-type"]) == (200, "application/json")
    assert chat.json()["choices"][0]["message"]["content"] == "hi"
    assert len(vectors.json()["data"][0]["embedding"]) == 8
