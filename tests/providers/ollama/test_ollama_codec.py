"""The Ollama codec against wire/ollama.md: request bodies, responses and the NDJSON stream."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    Image,
    InferenceConfig,
    InvalidResponse,
    Message,
    RateLimited,
    ResponseFormat,
    StopReason,
    StreamError,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.errors import InvalidRequest, ProviderError
from kova.providers import (
    ChatRequest,
    NdjsonFramer,
    StopEvent,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from kova.providers.ollama import (
    OllamaConfig,
    OllamaEmbeddingConfig,
    OllamaEmbeddingProvider,
    OllamaProvider,
    OllamaThink,
)
from kova.providers.ollama._codec import OllamaCodec
from kova.providers.ollama._config import parse_host
from kova.providers.ollama._convert import call_id, decode_response, encode_request
from kova.providers.ollama._stream import OllamaStreamDecoder

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CONFIG = OllamaConfig(model="qwen3:8b", base_url="http://localhost:11434")


def test_request_body_matches_the_wire_note() -> None:
    config = OllamaConfig(
        model="qwen3:8b",
        base_url="http://x",
        think=OllamaThink.ENABLED,
        keep_alive="5m",
        extra_options={"top_k": 40, "seed": 42, "num_ctx": 8192, "temperature": 0.9},
    )
    request = ChatRequest(
        messages=[
            Message.system("You are terse."),
            Message.user(
                [
                    Text(text="Weather in Tokyo? Also what is in this picture?"),
                    Image(media_type="image/png", data="iVBORw0KGgoAAA"),
                ]
            ),
        ],
        tools=[WEATHER],
        config=InferenceConfig(temperature=0.2, top_p=0.9, max_tokens=512, stop_sequences=["END"]),
    )
    assert encode_request(request, config, stream=True) == {
        "model": "qwen3:8b",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": "Weather in Tokyo? Also what is in this picture?",
                "images": ["iVBORw0KGgoAAA"],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "stream": True,
        "think": True,
        "options": {
            "top_k": 40,
            "seed": 42,
            "num_ctx": 8192,
            "temperature": 0.2,
            "top_p": 0.9,
            "num_predict": 512,
            "stop": ["END"],
        },
        "keep_alive": "5m",
    }


@pytest.mark.parametrize(
    ("think", "wire"),
    [
        (OllamaThink.ENABLED, True),
        (OllamaThink.DISABLED, False),
        (OllamaThink.HIGH, "high"),
        (OllamaThink.MEDIUM, "medium"),
        (OllamaThink.LOW, "low"),
    ],
)
def test_think_serialization(think: OllamaThink, wire: object) -> None:
    config = OllamaConfig(model="m", base_url="http://x", think=think)
    assert encode_request(ChatRequest.of("q"), config, stream=False)["think"] == wire


def test_config_defaults_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    config = OllamaConfig(model="llama3.2")
    assert config.base_url == "http://localhost:11434"
    assert config.timeout == 120.0
    assert "think" not in encode_request(ChatRequest.of("q"), config, stream=False)
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11500")
    assert OllamaConfig(model="m").base_url == "http://gpu-box:11500"
    with pytest.raises(TypeError):
        OllamaConfig(model="m", think=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_alive"):
        OllamaConfig(model="m", keep_alive="")
    with pytest.raises(ValueError, match="model"):
        OllamaConfig(model="")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("", "http://localhost:11434"),
        ("1.2.3.4", "http://1.2.3.4:11434"),
        (":56789", "http://localhost:56789"),
        ("example.com:56789/", "http://example.com:56789"),
        ("example.com/path", "http://example.com:11434/path"),
        ("https://example.com", "https://example.com"),
        ("[::1]", "http://[::1]:11434"),
        ("[::1]:9", "http://[::1]:9"),
    ],
)
def test_parse_host(host: str, url: str) -> None:
    assert parse_host(host) == url


def test_tool_round_trip_sends_objects_and_tool_names() -> None:
    first = call_id("get_weather", {"city": "Tokyo"}, 0)
    history = [
        Message.user("Weather in Tokyo and Oslo?"),
        Message.assistant(
            [
                Thinking(text="foreign", signature="sig"),
                ToolUse(id=first, name="get_weather", input={"city": "Tokyo"}),
                ToolUse(id="b", name="get_weather", input={"city": "Oslo"}),
            ]
        ),
        Message.tool_results(
            [
                ToolResult(tool_use_id=first, content="18°C, cloudy"),
                ToolResult.error("timeout", tool_use_id="b"),
            ]
        ),
    ]
    body = encode_request(ChatRequest.of(history), CONFIG, stream=False)
    assert body["messages"][1:] == [  # type: ignore[index]
        {
            "role": "assistant",
            "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}},
                {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            ],
        },
        {"role": "tool", "content": "18°C, cloudy", "tool_name": "get_weather"},
        {"role": "tool", "content": "timeout", "tool_name": "get_weather"},
    ]


def test_bad_history_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequest, match="no earlier assistant turn"):
        encode_request(
            ChatRequest.of([Message.tool_results([ToolResult(tool_use_id="x", content="")])]),
            CONFIG,
            stream=False,
        )
    with pytest.raises(InvalidRequest, match="base64"):
        encode_request(
            ChatRequest.of([Message.user([Image(url="https://x/cat.png")])]), CONFIG, stream=False
        )


def test_structured_output_is_format() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = ChatRequest.of(
        "q", config=InferenceConfig(response_format=ResponseFormat.named("a", schema))
    )
    assert encode_request(request, CONFIG, stream=False)["format"] == schema


def test_decode_response() -> None:
    body = {
        "model": "qwen3:8b",
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "User wants weather…",
            "tool_calls": [
                {
                    "id": "call_x1",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Tokyo"}},
                }
            ],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 169,
        "eval_count": 18,
    }
    response = decode_response(body)
    assert response.thinking == "User wants weather…"
    assert response.stop_reason == StopReason.TOOL_USE
    assert response.tool_uses == (
        ToolUse(
            id=call_id("get_weather", {"city": "Tokyo"}, 0),
            name="get_weather",
            input={"city": "Tokyo"},
        ),
    )
    assert response.usage == Usage(input_tokens=169, output_tokens=18)
    text = decode_response({"message": {"content": "hi"}, "done": True, "done_reason": "length"})
    assert text.text == "hi"
    assert text.stop_reason == StopReason.MAX_TOKENS
    assert text.usage == Usage()


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"message": "x"},
        {"message": {"content": 3}},
        {"message": {"tool_calls": {}}},
        {"message": {"tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}},
        {"message": {"tool_calls": [{"function": {"arguments": {}}}]}},
    ],
)
def test_malformed_bodies(body: object) -> None:
    with pytest.raises(InvalidResponse):
        decode_response(body)  # type: ignore[arg-type]


def test_error_body_in_a_200() -> None:
    with pytest.raises(ProviderError, match="not found"):
        decode_response({"error": 'model "llama9" not found, try pulling it first'})


def test_codec_paths_and_models() -> None:
    codec = OllamaCodec(CONFIG)
    assert codec.encode(ChatRequest.of("q"), stream=True).path == "/api/chat"
    listing = codec.encode_list_models(None)
    assert listing is not None
    assert (listing.method, listing.path) == ("GET", "/api/tags")
    page = codec.decode_list_models({"models": [{"name": "llama3.2:latest"}, {"x": 1}]})
    assert [m.id for m in page.models] == ["llama3.2:latest"]
    assert page.next_cursor is None
    assert codec.encode_count_tokens(ChatRequest.of("q")) is None


STREAM = [
    {
        "model": "qwen3:8b",
        "created_at": "t",
        "message": {"role": "assistant", "content": "", "thinking": "User asks"},
        "done": False,
    },
    {
        "model": "qwen3:8b",
        "created_at": "t",
        "message": {"role": "assistant", "content": "", "thinking": " about Tokyo."},
        "done": False,
    },
    {
        "model": "qwen3:8b",
        "created_at": "t",
        "message": {"role": "assistant", "content": "Checking"},
        "done": False,
    },
    {
        "model": "qwen3:8b",
        "created_at": "t",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_x1",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Tokyo"}},
                }
            ],
        },
        "done": False,
    },
    {
        "model": "qwen3:8b",
        "created_at": "t",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 182242375,
        "prompt_eval_count": 169,
        "eval_count": 15,
    },
]


def _ndjson(lines: list[object]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _decode(data: bytes, cuts: list[int] | None = None) -> tuple[list[object], object]:
    framer = NdjsonFramer()
    decoder = OllamaStreamDecoder()
    events: list[object] = []
    points = sorted({0, *(cuts or []), len(data)})
    for start, end in itertools.pairwise(points):
        frames = framer.feed(data[start:end])
        if frames:
            events.extend(decoder.feed(frames))
        if decoder.error is not None:
            return events, decoder.error
    tail = framer.finish()
    if tail:
        events.extend(decoder.feed(tail))
    if decoder.error is None:
        events.extend(decoder.finish())
    return events, decoder.error


def test_the_wire_note_stream() -> None:
    events, error = _decode(_ndjson(STREAM))
    assert error is None
    identifier = call_id("get_weather", {"city": "Tokyo"}, 0, "t")
    assert events == [
        ThinkingDelta(text="User asks"),
        ThinkingDelta(text=" about Tokyo."),
        TextDelta(text="Checking"),
        ToolUseStart(index=0, id=identifier, name="get_weather"),
        ToolUseDelta(index=0, partial_json='{"city":"Tokyo"}'),
        ToolUseEnd(index=0),
        StopEvent(stop_reason=StopReason.TOOL_USE),
        UsageEvent(usage=Usage(input_tokens=169, output_tokens=15)),
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=12))
def test_chunk_boundaries_do_not_change_the_events(cuts: list[int]) -> None:
    data = _ndjson([*STREAM[:2], {"message": {"content": "é€😀"}, "done": False}, *STREAM[2:]])
    whole, _ = _decode(data)
    split, error = _decode(data, [c % (len(data) + 1) for c in cuts])
    assert error is None
    assert split == whole


def test_cut_stream_and_error_line() -> None:
    events, error = _decode(_ndjson(STREAM[:3]))
    assert isinstance(error, StreamError)
    assert len(events) == 3
    events, error = _decode(
        _ndjson([STREAM[2], {"error": "an error was encountered while running the model"}])
    )
    assert events == [TextDelta(text="Checking")]
    assert isinstance(error, ProviderError)
    assert error.mid_stream


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[]",
        '{"message": 1}',
        '{"message": {"content": 1}}',
        '{"message": {"thinking": ["x"]}}',
        '{"message": {"tool_calls": "x"}}',
        '{"message": {"tool_calls": [{"function": {"name": "f", "arguments": 5}}]}}',
    ],
)
def test_malformed_lines(line: str) -> None:
    events, error = _decode(line.encode() + b"\n" + _ndjson(STREAM))
    assert isinstance(error, InvalidResponse)
    assert events == []


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "message",
                        "content",
                        "thinking",
                        "tool_calls",
                        "function",
                        "name",
                        "arguments",
                        "done",
                        "done_reason",
                        "error",
                        "eval_count",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_line_keeps_the_contract(value: object) -> None:
    decoder = OllamaStreamDecoder()
    events = decoder.feed([json.dumps(value)])
    for event in events:
        if isinstance(event, TextDelta | ThinkingDelta):
            assert isinstance(event.text, str)
        if isinstance(event, ToolUseDelta):
            assert isinstance(json.loads(event.partial_json), dict)


def test_rate_limit_status_is_classified() -> None:
    from kova.providers._classify import provider_error

    assert isinstance(provider_error("slow down", provider="ollama", status_code=429), RateLimited)


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("localhost:11434", "http://localhost:11434"),
        ("gpu-box", "http://gpu-box:11434"),
        ("http://gpu-box:11500/", "http://gpu-box:11500"),
        ("https://ollama.com", "https://ollama.com"),
    ],
)
def test_base_url_takes_what_ollama_host_takes(given: str, url: str) -> None:
    # The official client parses its host argument as it parses OLLAMA_HOST.
    assert OllamaConfig(model="m", base_url=given).base_url == url
    assert OllamaEmbeddingConfig(model="m", base_url=given).base_url == url


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"model": 3}, TypeError, "model must be a string"),
        ({"base_url": "ftp://gpu-box"}, ValueError, "base_url must be an http"),
        ({"base_url": 11434}, TypeError, "base_url must be a string"),
        ({"extra_options": {1: 2}}, TypeError, "extra_options"),
        ({"extra_headers": {"x-trace": 1}}, TypeError, "extra_headers"),
        ({"timeout": "120"}, TypeError, "timeout must be a number"),
    ],
)
def test_bad_config_values_are_clear_errors(
    fields: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        OllamaConfig(**{"model": "m", **fields})  # type: ignore[arg-type]


def test_a_provider_takes_its_config() -> None:
    with pytest.raises(TypeError, match="OllamaConfig"):
        OllamaProvider("llama3.2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="OllamaEmbeddingConfig"):
        OllamaEmbeddingProvider(OllamaConfig(model="m"))  # type: ignore[arg-type]


def test_an_image_given_as_a_data_url_goes_as_its_base64() -> None:
    # The form OpenAI users write: it carries the bytes, so nothing needs fetching.
    image = Image(url="data:image/png;base64,iVBORw0KGgo=")
    body = encode_request(ChatRequest.of([Message.user([image])]), CONFIG, stream=False)
    assert body["messages"] == [{"role": "user", "images": ["iVBORw0KGgo="]}]
