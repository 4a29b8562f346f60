"""The Anthropic codec against the payloads in shared/wire/anthropic.md (no network)."""

from __future__ import annotations

import json

import attrs
import pytest

from kova import _models as m
from kova._errors import InvalidResponse
from kova.providers.anthropic import AnthropicConfig
from kova.providers.anthropic._convert import (
    decode_count_tokens,
    decode_model_page,
    decode_response,
    decode_stop_reason,
    decode_usage,
    encode_count_tokens_request,
    encode_messages,
    encode_request,
    encode_tools,
    request_headers,
)

SETTINGS = AnthropicConfig(model="claude-sonnet-4-5", api_key="sk-test")
NO_EXTRAS = attrs.evolve(SETTINGS, adaptive_thinking=True, cache=False)
WEATHER = m.ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def test_tool_round_trip_matches_the_wire_reference() -> None:
    history = [
        m.Message.user("What's the weather in Paris?"),
        m.Message.assistant(
            [
                m.Thinking(text="Need weather…", signature="EqQBCkgIAR…"),
                m.Text(text="Checking."),
                m.ToolUse(id="toolu_01A9", name="get_weather", input={"city": "Paris"}),
            ]
        ),
        m.Message.tool_results(
            [
                m.ToolResult(tool_use_id="toolu_01A9", content="18°C, cloudy"),
                m.ToolResult(
                    tool_use_id="toolu_01B2", content=(m.Text(text="timeout"),), is_error=True
                ),
            ]
        ),
    ]
    system, wire = encode_messages(history)
    assert system is None
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need weather…", "signature": "EqQBCkgIAR…"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A9",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A9", "content": "18°C, cloudy"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B2",
                    "is_error": True,
                    "content": [{"type": "text", "text": "timeout"}],
                },
            ],
        },
    ]


def test_request_body_has_system_tools_thinking_cache_and_max_tokens() -> None:
    body = encode_request(
        [m.Message.system("You are terse."), m.Message.user("What's the weather in Paris?")],
        [WEATHER],
        m.InferenceConfig(stop_sequences=["\n\nHuman:"]),
        SETTINGS,
        stream=True,
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16_384,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]}
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "thinking": {"type": "adaptive"},
        "cache_control": {"type": "ephemeral"},
        "stop_sequences": ["\n\nHuman:"],
        "stream": True,
    }


def test_sampling_fields_are_sent_only_when_set() -> None:
    plain = encode_request([m.Message.user("hi")], [], m.InferenceConfig(), SETTINGS, stream=False)
    assert "temperature" not in plain
    assert "top_p" not in plain
    assert "stream" not in plain
    tuned = encode_request(
        [m.Message.user("hi")],
        [],
        m.InferenceConfig(temperature=0.2, top_p=0.9),
        SETTINGS,
        stream=False,
    )
    assert tuned["temperature"] == 0.2
    assert tuned["top_p"] == 0.9


def test_inference_config_overrides_model_and_max_tokens() -> None:
    body = encode_request(
        [m.Message.user("hi")],
        [],
        m.InferenceConfig(model="claude-haiku-4-5", max_tokens=512),
        SETTINGS,
        stream=False,
    )
    assert body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 512


def test_thinking_off_and_cache_off() -> None:
    settings = attrs.evolve(SETTINGS, adaptive_thinking=False, cache=False)
    body = encode_request([m.Message.user("hi")], [], m.InferenceConfig(), settings, stream=False)
    # The official SDK omits thinking when it is off (count_tokens too); kova does the same.
    assert "thinking" not in body
    assert "thinking" not in encode_count_tokens_request(
        [m.Message.user("hi")], [], m.InferenceConfig(), settings
    )
    assert "cache_control" not in body


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_every_effort_level_maps_to_output_config(effort: str) -> None:
    settings = attrs.evolve(SETTINGS, effort=effort)
    body = encode_request([m.Message.user("hi")], [], m.InferenceConfig(), settings, stream=False)
    assert body["output_config"] == {"effort": effort}


def test_unknown_effort_is_rejected() -> None:
    with pytest.raises(ValueError, match="effort"):
        AnthropicConfig(model="x", effort="extreme")  # type: ignore[arg-type]


def test_response_format_becomes_output_config_format_next_to_effort() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    body = encode_request(
        [m.Message.user("hi")],
        [],
        m.InferenceConfig(response_format=m.ResponseFormat.named("answer", schema)),
        attrs.evolve(SETTINGS, effort="low"),
        stream=False,
    )
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": schema},
    }


def test_system_messages_are_concatenated_at_top_level() -> None:
    system, wire = encode_messages(
        [m.Message.system("One."), m.Message.system("Two."), m.Message.user("hi")]
    )
    assert system == "One.\n\nTwo."
    assert [turn["role"] for turn in wire] == ["user"]  # type: ignore[index]


def test_images_base64_and_url() -> None:
    _, wire = encode_messages(
        [
            m.Message.user(
                [
                    m.Image(media_type="image/png", data="iVBORw0KGgo="),
                    m.Image(url="https://example.com/cat.jpg"),
                    m.Text(text="What is this?"),
                ]
            )
        ]
    )
    assert wire[0]["content"] == [  # type: ignore[index]
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What is this?"},
    ]


def test_tool_result_with_image_content() -> None:
    _, wire = encode_messages(
        [
            m.Message.tool_results(
                [
                    m.ToolResult(
                        tool_use_id="toolu_1",
                        content=(m.Text(text="chart:"), m.Image(media_type="image/gif", data="R0")),
                    )
                ]
            )
        ]
    )
    assert wire == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "chart:"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/gif", "data": "R0"},
                        },
                    ],
                }
            ],
        }
    ]


def test_user_side_turns_merge_with_tool_results_first() -> None:
    _, wire = encode_messages(
        [
            m.Message.user("go"),
            m.Message.assistant([m.ToolUse(id="t1", name="f")]),
            m.Message.user("also consider this"),
            m.Message.tool_results([m.ToolResult(tool_use_id="t1", content="done")]),
            m.Message.assistant("ok"),
            m.Message.assistant("and more"),
        ]
    )
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
                {"type": "text", "text": "also consider this"},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": "and more"}],
        },
    ]


def test_unsigned_thinking_and_empty_text_are_dropped_redacted_kept() -> None:
    _, wire = encode_messages(
        [
            m.Message.user("q"),
            m.Message.assistant(
                [
                    m.Thinking(text="another provider's reasoning"),
                    m.RedactedThinking(data="EmwKAhgB"),
                    m.Text(text=""),
                    m.Text(text="answer"),
                ]
            ),
            m.Message.assistant([m.Thinking(text="only unsigned")]),
        ]
    )
    assert wire[1] == {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "text", "text": "answer"},
        ],
    }
    assert len(wire) == 2


def test_tool_without_description_omits_it() -> None:
    assert encode_tools([m.ToolDefinition(name="noop")]) == [
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}}
    ]


def test_count_tokens_body_is_the_prompt_without_generation_fields() -> None:
    messages = [m.Message.system("sys"), m.Message.user("hi")]
    config = m.InferenceConfig(temperature=0.5, stop_sequences=["X"], max_tokens=9)
    count = encode_count_tokens_request(messages, [WEATHER], config, SETTINGS)
    full = encode_request(messages, [WEATHER], config, SETTINGS, stream=True)
    generation_only = {"max_tokens", "temperature", "stop_sequences", "stream"}
    assert set(full) - set(count) == generation_only
    assert {key: full[key] for key in count} == count


def test_extra_headers_are_sent() -> None:
    settings = attrs.evolve(SETTINGS, extra_headers={"Anthropic-Beta": "context-1m-2025-08-07"})
    assert request_headers(settings)["anthropic-beta"] == "context-1m-2025-08-07"


def test_decode_non_streaming_response_from_the_wire_reference() -> None:
    body = json.loads(
        """{"id": "msg_01X", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
 "content": [{"type": "text", "text": "Checking."},
             {"type": "tool_use", "id": "toolu_01A9", "name": "get_weather",
              "input": {"city": "Paris"}}],
 "stop_reason": "tool_use", "stop_sequence": null,
 "usage": {"input_tokens": 412, "output_tokens": 57, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 1830, "service_tier": "standard"}}"""
    )
    response = decode_response(body)
    assert response.content == (
        m.Text(text="Checking."),
        m.ToolUse(id="toolu_01A9", name="get_weather", input={"city": "Paris"}),
    )
    assert response.stop_reason == m.StopReason.TOOL_USE
    assert response.usage == m.Usage(
        input_tokens=412 + 1830, output_tokens=57, cache_read_tokens=1830, cache_creation_tokens=0
    )
    assert response.thinking is None


def test_decode_response_keeps_signed_and_redacted_thinking_in_content() -> None:
    response = decode_response(
        {
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                {"type": "text", "text": "Hi", "citations": None},
            ],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 7,
                "output_tokens_details": {"thinking_tokens": 4},
            },
        }
    )
    assert response.content == (
        m.Thinking(text="hmm", signature="sig=="),
        m.RedactedThinking(data="EmwKAhgB"),
        m.Text(text="Hi"),
    )
    assert response.thinking == "hmm"
    assert response.usage is not None
    assert response.usage.reasoning_tokens == 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", m.StopReason.END_TURN),
        ("stop_sequence", m.StopReason.STOP_SEQUENCE),
        ("tool_use", m.StopReason.TOOL_USE),
        ("max_tokens", m.StopReason.MAX_TOKENS),
        (
            "model_context_window_exceeded",
            m.StopReason(kind=m.StopKind.MAX_TOKENS, raw="model_context_window_exceeded"),
        ),
        ("pause_turn", m.StopReason.unknown("pause_turn")),
        ("refusal", m.StopReason.unknown("refusal")),
        ("brand_new_reason", m.StopReason.unknown("brand_new_reason")),
    ],
)
def test_stop_reason_mapping(raw: str, expected: m.StopReason) -> None:
    assert decode_stop_reason(raw) == expected


def test_usage_total_input_includes_cache_reads_and_writes() -> None:
    usage = decode_usage(
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 1000,
            "output_tokens": 3,
        }
    )
    assert usage == m.Usage(
        input_tokens=1110, output_tokens=3, cache_read_tokens=100, cache_creation_tokens=1000
    )
    assert usage.total_tokens == 1113


def test_decode_response_rejects_non_message() -> None:
    with pytest.raises(InvalidResponse):
        decode_response({"type": "error"})


def test_decode_count_tokens() -> None:
    assert decode_count_tokens({"input_tokens": 2095}) == 2095
    with pytest.raises(InvalidResponse):
        decode_count_tokens({"tokens": 1})


def test_decode_model_page_from_the_wire_reference() -> None:
    page = {
        "data": [
            {
                "type": "model",
                "id": "claude-sonnet-4-5-20250929",
                "display_name": "Claude Sonnet 4.5",
                "created_at": "2025-09-29T00:00:00Z",
                "max_input_tokens": 200000,
                "max_tokens": 64000,
            }
        ],
        "has_more": False,
        "first_id": "claude-sonnet-4-5-20250929",
        "last_id": "claude-sonnet-4-5-20250929",
    }
    models, after = decode_model_page(page)
    assert after is None
    assert models == [
        m.ModelInfo(
            id="claude-sonnet-4-5-20250929",
            created=1759104000,
            owned_by="anthropic",
            display_name="Claude Sonnet 4.5",
        )
    ]
    _, after = decode_model_page({**page, "has_more": True})
    assert after == "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {"type": "adaptive"}),
        ({"thinking_display": "omitted"}, {"type": "adaptive", "display": "omitted"}),
        ({"adaptive_thinking": False}, None),
        ({"thinking_budget": 4096}, {"type": "enabled", "budget_tokens": 4096}),
        (
            {"thinking_budget": 2048, "thinking_display": "summarized"},
            {"type": "enabled", "budget_tokens": 2048, "display": "summarized"},
        ),
    ],
)
def test_thinking_configurations(settings: dict[str, object], expected: dict[str, object]) -> None:
    config = attrs.evolve(SETTINGS, **settings)
    body = encode_request([m.Message.user("hi")], [], m.InferenceConfig(), config, stream=False)
    assert body.get("thinking") == expected
    counted = encode_count_tokens_request([m.Message.user("hi")], [], m.InferenceConfig(), config)
    assert counted.get("thinking") == expected


@pytest.mark.parametrize(
    "settings",
    [
        {"thinking_budget": 1000},
        {"thinking_budget": 20_000, "max_tokens": 16_000},
        {"thinking_display": "verbose"},
        {"max_tokens": 0},
        {"timeout": 0},
        {"model": ""},
    ],
)
def test_invalid_settings_are_rejected(settings: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - attrs validators raise plain ValueError
        AnthropicConfig(**{"model": "claude-x", **settings})  # type: ignore[arg-type]
