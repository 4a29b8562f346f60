"""Converse request and response JSON: pure translation, checked against the wire notes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kova import (
    Image,
    InferenceConfig,
    InvalidRequest,
    InvalidResponse,
    Message,
    RedactedThinking,
    ResponseFormat,
    StopKind,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest
from kova.providers.bedrock import BedrockConfig
from kova.providers.bedrock._codec import BedrockCodec
from kova.providers.bedrock._convert import (
    decode_error_details,
    decode_response,
    decode_stop_reason,
    encode_count_tokens_request,
    encode_request,
    model_path,
)

CONFIG = BedrockConfig(region="us-east-1", model_id="anthropic.claude-3-5-haiku-20241022-v1:0")
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def test_model_ids_are_one_percent_encoded_segment() -> None:
    assert model_path("us.anthropic.claude-sonnet-4-20250514-v1:0", "converse-stream") == (
        "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    )
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x"
    assert model_path(arn, "converse") == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.x/converse"
    )


def test_wire_notes_request() -> None:
    config = BedrockConfig(
        region="us-east-1",
        model_id="m",
        additional_model_request_fields={"thinking": {"type": "enabled", "budget_tokens": 2048}},
    )
    body = encode_request(
        [
            Message.system("You are terse."),
            Message.user(
                [
                    Text(text="Weather in Paris?"),
                    Text(text=""),
                    Image(media_type="image/png", data="iVBO"),
                ]
            ),
        ],
        [WEATHER],
        InferenceConfig(max_tokens=1024, temperature=0.5, top_p=0.9, stop_sequences=["END"]),
        config,
    )
    assert body == {
        "system": [{"text": "You are terse."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "Weather in Paris?"},
                    {"image": {"format": "png", "source": {"bytes": "iVBO"}}},
                ],
            }
        ],
        "inferenceConfig": {
            "maxTokens": 1024,
            "temperature": 0.5,
            "topP": 0.9,
            "stopSequences": ["END"],
        },
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "description": "Current weather",
                        "inputSchema": {"json": WEATHER.parameters},
                    }
                }
            ]
        },
        "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
    }


def test_tool_round_trip_and_signed_reasoning_echo() -> None:
    history = [
        Message.user("Weather in Paris?"),
        Message.assistant(
            [
                Thinking(text="Need weather", signature="Eu0CCkgI"),
                Thinking(text="unsigned, from another provider"),
                RedactedThinking(data="AAE="),
                Text(text="Checking."),
                ToolUse(id="tooluse_1", name="get_weather", input={"city": "Paris"}),
            ]
        ),
        Message.tool_results([ToolResult(tool_use_id="tooluse_1", content="18°C, cloudy")]),
        Message.tool_results(
            [ToolResult(tool_use_id="tooluse_2", content="no such city", is_error=True)]
        ),
        Message.user("Thanks"),
    ]
    body = encode_request(history, [WEATHER], InferenceConfig(), CONFIG)
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {"text": "Need weather", "signature": "Eu0CCkgI"}
                    }
                },
                {"reasoningContent": {"redactedContent": "AAE="}},
                {"text": "Checking."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18°C, cloudy"}]}},
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "content": [{"text": "no such city"}],
                        "status": "error",
                    }
                },
                {"text": "Thanks"},
            ],
        },
    ]


def test_tool_result_parts_documents_and_json() -> None:
    config = BedrockConfig(region="us-east-1", model_id="m", json_tool_results=True)
    body = encode_request(
        [
            Message.user([Image(media_type="application/pdf", data="JVBERi0=")]),
            Message.tool_results(
                [
                    ToolResult(tool_use_id="a", content='{"temp": 18}'),
                    ToolResult(
                        tool_use_id="b",
                        content=(Text(text="see"), Image(media_type="image/jpeg", data="/9j/")),
                    ),
                ]
            ),
        ],
        [],
        InferenceConfig(),
        config,
    )
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "a", "content": [{"json": {"temp": 18}}]}},
                {
                    "toolResult": {
                        "toolUseId": "b",
                        "content": [
                            {"text": "see"},
                            {"image": {"format": "jpeg", "source": {"bytes": "/9j/"}}},
                        ],
                    }
                },
                {
                    "document": {
                        "format": "pdf",
                        "name": "document-1",
                        "source": {"bytes": "JVBERi0="},
                    }
                },
            ],
        }
    ]


def test_structured_output_schema_travels_as_a_string() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
    body: Any = encode_request(
        [Message.user("x")],
        [],
        InferenceConfig(
            response_format=ResponseFormat(name="CityInfo", schema=schema, description="A city")
        ),
        CONFIG,
    )
    definition = body["outputConfig"]["textFormat"]["structure"]["jsonSchema"]
    assert body["outputConfig"]["textFormat"]["type"] == "json_schema"
    assert definition["name"] == "CityInfo"
    assert definition["description"] == "A city"
    assert json.loads(definition["schema"]) == schema


@pytest.mark.parametrize(
    "image",
    [Image(url="https://example.com/cat.png"), Image(media_type="video/mp4", data="AAAA")],
)
def test_media_bedrock_cannot_carry_is_refused(image: Image) -> None:
    with pytest.raises(InvalidRequest):
        encode_request([Message.user([image])], [], InferenceConfig(), CONFIG)


def test_codec_paths_and_model_override() -> None:
    codec = BedrockCodec(CONFIG)
    request = ChatRequest.of("hi", config=InferenceConfig(model="us.meta.llama3-v1:0"))
    assert codec.encode(request, stream=True).path == "/model/us.meta.llama3-v1%3A0/converse-stream"
    assert codec.encode(ChatRequest.of("hi"), stream=False).path == (
        "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    )
    count = codec.encode_count_tokens(ChatRequest.of([Message.system("s"), Message.user("u")]))
    assert count is not None
    assert count.path.endswith("/count-tokens")
    assert count.body == {
        "input": {
            "converse": {
                "messages": [{"role": "user", "content": [{"text": "u"}]}],
                "system": [{"text": "s"}],
            }
        }
    }
    counted: Any = encode_count_tokens_request([Message.user("u")], [WEATHER], CONFIG)
    assert counted["input"]["converse"]["toolConfig"]["tools"][0]["toolSpec"]["name"] == (
        "get_weather"
    )


def test_count_tokens_body_is_the_prompt_only() -> None:
    # The config's max_tokens and cache points belong to Converse, not to CountTokens; the
    # additional fields are part of the prompt.
    settings = BedrockConfig(
        region="us-east-1",
        model_id="m",
        max_tokens=64,
        cache_prompt=True,
        additional_model_request_fields={"top_k": 5},
    )
    converse: Any = encode_request([Message.user("u")], [WEATHER], InferenceConfig(), settings)
    counted: Any = encode_count_tokens_request([Message.user("u")], [WEATHER], settings)
    assert converse["inferenceConfig"] == {"maxTokens": 64}
    del converse["inferenceConfig"]
    assert converse["messages"][0]["content"].pop() == {"cachePoint": {"type": "default"}}
    assert converse["toolConfig"]["tools"].pop() == {"cachePoint": {"type": "default"}}
    assert list(counted["input"]["converse"]) == list(converse)
    assert counted == {"input": {"converse": converse}}


def test_wire_notes_response() -> None:
    response = decode_response(
        {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}},
                        {"reasoningContent": {"reasoningText": {"text": " more"}}},
                        {"text": "Checking."},
                        {
                            "toolUse": {
                                "toolUseId": "tooluse_lAG_zP8Q",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            }
                        },
                        {"citationsContent": {}},
                    ],
                }
            },
            "stopReason": "tool_use",
            "usage": {
                "inputTokens": 471,
                "outputTokens": 91,
                "totalTokens": 562,
                "cacheReadInputTokens": 0,
                "cacheWriteInputTokens": 0,
            },
            "metrics": {"latencyMs": 422},
        }
    )
    assert response.content == (
        Thinking(text="hm", signature="s"),
        Text(text="Checking."),
        ToolUse(id="tooluse_lAG_zP8Q", name="get_weather", input={"city": "Paris"}),
    )
    assert response.thinking == "hm more"
    assert response.stop_reason == StopReason.TOOL_USE
    assert response.usage == Usage(input_tokens=471, output_tokens=91)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("end_turn", StopKind.END_TURN),
        ("stop_sequence", StopKind.STOP_SEQUENCE),
        ("tool_use", StopKind.TOOL_USE),
        ("max_tokens", StopKind.MAX_TOKENS),
        ("model_context_window_exceeded", StopKind.MAX_TOKENS),
        ("guardrail_intervened", StopKind.UNKNOWN),
        ("content_filtered", StopKind.UNKNOWN),
        ("malformed_tool_use", StopKind.UNKNOWN),
    ],
)
def test_stop_reasons(raw: str, kind: StopKind) -> None:
    assert decode_stop_reason(raw).kind is kind


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"output": {}},
        {"output": {"message": {"content": [{"text": 1}]}}},
        {
            "output": {
                "message": {"content": [{"toolUse": {"toolUseId": "a", "name": "b", "input": []}}]}
            }
        },
    ],
)
def test_malformed_responses_are_invalid(body: object) -> None:
    with pytest.raises(InvalidResponse):
        decode_response(body)


def test_error_details() -> None:
    details = decode_error_details(
        {"__type": "com.amazon.coral.validate#ValidationException", "Message": "bad model"}
    )
    assert (details.error_type, details.message) == ("ValidationException", "bad model")
    assert decode_error_details("nope").message is None


def test_cache_points_mark_system_tools_and_the_conversation() -> None:
    config = BedrockConfig(region="us-east-1", model_id="m", cache_prompt=True)
    body: Any = encode_request(
        [
            Message.system("Be terse."),
            Message.user("Hi"),
            Message.assistant("Hello"),
            Message.user("Weather?"),
        ],
        [WEATHER],
        InferenceConfig(),
        config,
    )
    point = {"cachePoint": {"type": "default"}}
    assert body["system"] == [{"text": "Be terse."}, point]
    assert body["toolConfig"]["tools"][-1] == point
    assert body["messages"][-1]["content"] == [{"text": "Weather?"}, point]
    assert point not in body["messages"][0]["content"]
    plain: Any = encode_request([Message.user("Hi")], [], InferenceConfig(), CONFIG)
    assert "cachePoint" not in json.dumps(plain)
