"""The pure codec against the payloads documented in wire/openai.md."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    Image,
    InferenceConfig,
    InvalidResponse,
    KovaError,
    Message,
    ProviderError,
    RedactedThinking,
    ResponseFormat,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ModelInfo
from kova.providers.openai import OpenAiConfig
from kova.providers.openai._convert import (
    decode_models,
    decode_response,
    decode_usage,
    encode_messages,
    encode_request,
    error_object,
    finish_reason_to_stop,
)
from kova.testing._wire.openai import decode_request, stop_to_finish_reason

from .wire_samples import NON_STREAM_RESPONSE

CONFIG = OpenAiConfig(model="gpt-4.1", api_key="sk-test")
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


def test_documented_request_body() -> None:
    messages = [
        Message.system("You are terse."),
        Message.user(
            [Text(text="What's in this image?"), Image(media_type="image/png", data="iVBOR")]
        ),
    ]
    inference = InferenceConfig(temperature=0.2, top_p=1, stop_sequences=["END"], max_tokens=1024)
    body = encode_request(messages, [WEATHER], inference, CONFIG, stream=True)
    assert body == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What's in this image?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                        "additionalProperties": False,
                    },
                },
            }
        ],
        "temperature": 0.2,
        "top_p": 1,
        "stop": ["END"],
        "max_completion_tokens": 1024,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_documented_tool_round_trip_messages() -> None:
    history = [
        Message.assistant([ToolUse(id="call_4Xz", name="get_weather", input={"city": "Paris"})]),
        Message.tool_results([ToolResult(tool_use_id="call_4Xz", content="18°C, cloudy")]),
    ]
    encoded = encode_messages(history)
    assert json.dumps(encoded[0], separators=(",", ":"), ensure_ascii=False) == (
        '{"role":"assistant","content":null,"tool_calls":[{"id":"call_4Xz","type":"function",'
        '"function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]}'
    )
    assert encoded[1] == {"role": "tool", "tool_call_id": "call_4Xz", "content": "18°C, cloudy"}


def test_several_tool_results_become_one_tool_message_each_in_order() -> None:
    message = Message.tool_results(
        [
            ToolResult(tool_use_id="call_1", content="one"),
            ToolResult(tool_use_id="call_2", content=(Text(text="t"), Text(text="wo"))),
            ToolResult.error("boom", tool_use_id="call_3"),
        ]
    )
    assert encode_messages([message]) == [
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        # Several text parts go as a parts array, as the official SDK sends them.
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": "t"}, {"type": "text", "text": "wo"}],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "boom"},
    ]


def test_tool_result_images_follow_as_a_user_message() -> None:
    message = Message.tool_results(
        [
            ToolResult(
                tool_use_id="call_1",
                content=(Text(text="shot"), Image(url="https://x.test/a.png")),
            )
        ]
    )
    assert encode_messages([message]) == [
        {"role": "tool", "tool_call_id": "call_1", "content": "shot"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}],
        },
    ]


def test_thinking_blocks_from_other_providers_are_dropped() -> None:
    history = [
        Message.assistant([Thinking(text="hmm", signature="sig"), Text(text="Hi")]),
        Message.assistant([RedactedThinking(data="xx")]),
        Message.user("next"),
    ]
    assert encode_messages(history) == [
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "next"},
    ]


def test_assistant_text_with_tool_calls_and_invalid_raw_arguments() -> None:
    message = Message.assistant(
        [
            Text(text="Let me check."),
            ToolUse(id="c1", name="f", input={}, raw_arguments='{"a": '),
        ]
    )
    assert encode_messages([message]) == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}
            ],
        }
    ]


def test_image_urls_are_sent_as_is() -> None:
    message = Message.user([Image(url="https://x.test/cat.jpg")])
    assert encode_messages([message]) == [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}}],
        }
    ]


def test_documented_structured_output() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    inference = InferenceConfig(response_format=ResponseFormat.named("answer", schema))
    body = encode_request([Message.user("q")], [], inference, CONFIG, stream=False)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": True, "schema": schema},
    }
    assert "stream" not in body
    assert "stream_options" not in body


def test_inference_config_overrides_and_config_defaults() -> None:
    config = attrs.evolve(CONFIG, max_tokens=100, temperature=0.5, reasoning_effort="high")
    body = encode_request([Message.user("q")], [], InferenceConfig(), config, stream=False)
    assert body["model"] == "gpt-4.1"
    assert body["max_completion_tokens"] == 100
    assert body["temperature"] == 0.5
    assert body["reasoning_effort"] == "high"
    overridden = encode_request(
        [Message.user("q")],
        [],
        InferenceConfig(model="o4-mini", max_tokens=7, temperature=0.0),
        attrs.evolve(config, max_tokens_field="max_tokens"),
        stream=False,
    )
    assert overridden["model"] == "o4-mini"
    assert overridden["max_tokens"] == 7
    assert "max_completion_tokens" not in overridden
    assert overridden["temperature"] == 0.0


def test_documented_non_stream_response() -> None:
    response = decode_response(NON_STREAM_RESPONSE)
    assert response.content == (
        ToolUse(id="call_4Xz", name="get_weather", input={"city": "Paris"}),
    )
    assert response.stop_reason == StopReason.TOOL_USE
    assert response.usage == Usage(input_tokens=44, output_tokens=16, total_tokens=60)
    assert response.thinking is None


def test_usage_with_cached_and_reasoning_tokens() -> None:
    usage = decode_usage(
        {
            "prompt_tokens": 2000,
            "completion_tokens": 300,
            "total_tokens": 2300,
            "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": None},
            "completion_tokens_details": {"reasoning_tokens": 128},
        }
    )
    assert usage == Usage(
        input_tokens=2000,
        output_tokens=300,
        total_tokens=2300,
        cache_read_tokens=1536,
        reasoning_tokens=128,
    )
    assert decode_usage(None) is None
    assert decode_usage({"prompt_tokens": 3, "completion_tokens": 4}) == Usage(
        input_tokens=3, output_tokens=4, total_tokens=7
    )


@pytest.mark.parametrize(
    ("finish", "has_calls", "expected"),
    [
        ("stop", False, StopReason.END_TURN),
        ("tool_calls", True, StopReason.TOOL_USE),
        ("function_call", True, StopReason.TOOL_USE),
        ("length", False, StopReason.MAX_TOKENS),
        ("length", True, StopReason.MAX_TOKENS),
        ("content_filter", False, StopReason.unknown("content_filter")),
        ("abort", False, StopReason.unknown("abort")),
        ("stop", True, StopReason.TOOL_USE),
        ("abort", True, StopReason.TOOL_USE),
        (None, False, StopReason.END_TURN),
    ],
)
def test_finish_reason_mapping(finish: str | None, has_calls: bool, expected: StopReason) -> None:
    assert finish_reason_to_stop(finish, has_tool_calls=has_calls) == expected


@pytest.mark.parametrize(
    "stop",
    [StopReason.END_TURN, StopReason.TOOL_USE, StopReason.MAX_TOKENS, StopReason.unknown("x")],
)
def test_stop_reasons_survive_the_round_trip(stop: StopReason) -> None:
    assert finish_reason_to_stop(stop_to_finish_reason(stop), has_tool_calls=False) == (
        stop if stop != StopReason.TOOL_USE else StopReason.TOOL_USE
    )


def message_body(message: dict[str, object], finish: str = "stop") -> dict[str, object]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_text_becomes_thinking(field: str) -> None:
    response = decode_response(
        message_body({"role": "assistant", "content": "42", field: "let me think"})
    )
    assert response.thinking == "let me think"
    assert response.text == "42"
    assert response.stop_reason == StopReason.END_TURN


def test_parallel_tool_calls_and_invalid_arguments() -> None:
    response = decode_response(
        message_body(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"x":1}'},
                    },
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[1"}},
                    {"id": "c", "type": "function", "function": {"name": "h", "arguments": ""}},
                ],
            },
            finish="stop",
        )
    )
    assert response.content == (
        ToolUse(id="a", name="f", input={"x": 1}),
        ToolUse(id="b", name="g", input={}, raw_arguments="[1"),
        ToolUse(id="c", name="h", input={}),
    )
    assert response.stop_reason == StopReason.TOOL_USE


def test_a_refusal_is_text_with_an_unknown_stop() -> None:
    response = decode_response(
        message_body({"role": "assistant", "content": None, "refusal": "I can't help with that."})
    )
    assert response.text == "I can't help with that."
    assert response.stop_reason == StopReason.unknown("refusal")


def test_error_bodies_and_malformed_responses_raise() -> None:
    with pytest.raises(ProviderError, match="bad thing") as info:
        decode_response({"error": {"message": "bad thing", "type": "server_error"}})
    assert info.value.error_type == "server_error"
    with pytest.raises(InvalidResponse):
        decode_response({"choices": []})
    with pytest.raises(InvalidResponse):
        decode_response([1, 2])


def test_documented_model_list() -> None:
    body = {
        "object": "list",
        "data": [{"id": "gpt-4.1", "object": "model", "created": 1744316542, "owned_by": "system"}],
    }
    assert decode_models(body) == [
        ModelInfo(id="gpt-4.1", object="model", created=1744316542, owned_by="system")
    ]
    with pytest.raises(InvalidResponse):
        decode_models({"object": "list"})


# --- encode -> decode_request (what the fake server reads) --------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), texts)
arguments = st.dictionaries(st.text(min_size=1, max_size=5), json_scalars, max_size=3)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    history: list[Message] = [Message.system(draw(texts))]
    for turn in range(draw(st.integers(0, 3))):
        history.append(Message.user(draw(st.text(min_size=1, max_size=20))))
        count = draw(st.integers(0, 2))
        calls = [
            ToolUse(id=f"call_{turn}_{n}", name=f"tool_{n}", input=draw(arguments))
            for n in range(count)
        ]
        text = draw(texts)
        blocks: list[Text | ToolUse] = ([Text(text=text)] if text else []) + calls
        if blocks:
            history.append(Message.assistant(blocks))
        if calls:
            history.append(
                Message.tool_results(
                    [ToolResult(tool_use_id=call.id, content=draw(texts)) for call in calls]
                )
            )
    return history


@settings(deadline=None)  # wall-clock deadlines flake on a shared 2-core box
@given(conversations())
def test_decode_request_reads_back_what_encode_request_wrote(history: list[Message]) -> None:
    inference = InferenceConfig(max_tokens=50, temperature=0.3, stop_sequences=["X"])
    body = encode_request(history, [WEATHER], inference, CONFIG, stream=True)
    decoded = decode_request(json.loads(json.dumps(body)))
    assert list(decoded.messages) == history
    assert decoded.tools == (WEATHER,)
    assert decoded.config == attrs.evolve(inference, model="gpt-4.1")
    assert decoded.stream
    assert decoded.include_usage


def test_tool_results_inside_a_user_message_come_first_as_tool_messages() -> None:
    # Histories written for Anthropic keep tool results in user messages.
    message = Message.user(
        [ToolResult(tool_use_id="call_1", content="42"), Text(text="and "), Text(text="then?")]
    )
    assert encode_messages([message]) == [
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        # Several text blocks stay separate content parts (never concatenated).
        {
            "role": "user",
            "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "then?"}],
        },
    ]


def test_echo_reasoning_keeps_and_sends_back_reasoning_content() -> None:
    body = message_body({"role": "assistant", "content": "ok", "reasoning_content": "why"})
    assert decode_response(body).content == (Text(text="ok"),)
    kept = decode_response(body, keep_reasoning=True)
    assert kept.content == (Thinking(text="why"), Text(text="ok"))
    assert kept.thinking == "why"
    history = [Message.assistant(kept.content)]
    assert encode_messages(history) == [{"role": "assistant", "content": "ok"}]
    assert encode_messages(history, echo_reasoning=True) == [
        {"role": "assistant", "content": "ok", "reasoning_content": "why"}
    ]
    echoed = encode_request(
        history, [], InferenceConfig(), attrs.evolve(CONFIG, echo_reasoning=True), stream=False
    )
    assert echoed["messages"][0]["reasoning_content"] == "why"


def test_a_model_s_arguments_are_echoed_byte_for_byte() -> None:
    raw = '{"city": "caf\\u00e9"}'  # spacing and an escape the model chose
    body = message_body(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": raw}}
            ],
        }
    )
    call = decode_response(body).tool_uses[0]
    assert call.input == {"city": "caf\u00e9"}
    echoed = encode_messages([Message.assistant([call])])
    assert echoed[0]["tool_calls"][0]["function"]["arguments"] == raw  # type: ignore[index]
    # An edited call is re-encoded from its input, never echoed stale.
    edited = attrs.evolve(call, input={"city": "Oslo"})
    out = encode_messages([Message.assistant([edited])])
    assert out[0]["tool_calls"][0]["function"]["arguments"] == '{"city":"Oslo"}'  # type: ignore[index]


@pytest.mark.parametrize(
    ("error", "error_class"),
    [
        (
            {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"},
            "RATE_LIMITED",
        ),
        ({"message": "busy", "type": "server_error", "code": None}, "OVERLOADED"),
        ({"message": "odd", "type": "some_type", "code": "some_code"}, "OTHER"),
    ],
)
def test_an_error_body_is_classified_as_the_same_error_in_a_stream_is(
    error: dict[str, object], error_class: str
) -> None:
    # One rule for an error object wherever it comes: a 200 body with "error" and a stream's
    # error chunk give the same class and type (the known code wins over the type).
    with pytest.raises(KovaError) as body:
        decode_response({"error": error})
    stream = error_object(error, mid_stream=True)
    assert body.value.error_class.name == error_class  # type: ignore[attr-defined]
    assert stream.error_class.name == error_class
    assert body.value.error_type == stream.error_type  # type: ignore[attr-defined]
