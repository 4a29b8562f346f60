"""The Gemini codec's pure translation, against the payloads in wire/gemini.md."""

from __future__ import annotations

import json

import pytest

from kova import (
    Image,
    InferenceConfig,
    InvalidResponse,
    Message,
    ProviderAuthError,
    RateLimited,
    ResponseFormat,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.errors import InvalidRequest, ModelNotFound, ProviderOverloaded
from kova.providers import ChatRequest
from kova.providers.gemini import (
    GeminiConfig,
    GeminiEmbeddingConfig,
    GeminiEmbeddingProvider,
    GeminiProvider,
)
from kova.providers.gemini._codec import GeminiCodec
from kova.providers.gemini._convert import (
    FOREIGN_SIGNATURE,
    SYNTHETIC_ID_KEY,
    THOUGHT_SIGNATURE_KEY,
    decode_response,
    encode_contents,
    encode_request,
    error_details,
    finish_reason_to_stop,
    parse_retry_delay,
    stream_error,
)

CONFIG = GeminiConfig(model="gemini-2.5-flash", api_key="k")
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def test_request_body_matches_the_wire_note() -> None:
    image = Image(media_type="image/png", data="iVBORw0KGgo=")
    request = ChatRequest(
        messages=[
            Message.system("You are terse."),
            Message.user([Text(text="Weather in Paris? And describe this image."), image]),
        ],
        tools=[WEATHER],
        config=InferenceConfig(
            temperature=0.7, top_p=0.95, max_tokens=2048, stop_sequences=["END"]
        ),
    )
    config = GeminiConfig(model="gemini-2.5-flash", api_key="k", thinking_budget=1024)
    assert encode_request(request, config) == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Weather in Paris? And describe this image."},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                ],
            }
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather",
                        "parametersJsonSchema": WEATHER.parameters,
                    }
                ]
            }
        ],
        "generationConfig": {
            "temperature": 0.7,
            "topP": 0.95,
            "maxOutputTokens": 2048,
            "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        },
    }


def test_paths_and_stream_query() -> None:
    codec = GeminiCodec(CONFIG)
    request = ChatRequest.of("hi")
    plain = codec.encode(request, stream=False)
    streamed = codec.encode(request, stream=True)
    assert plain.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert streamed.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert streamed.query == {"alt": "sse"}
    override = codec.encode(
        ChatRequest.of("hi", config=InferenceConfig(model="models/gemini-2.5-pro")), stream=False
    )
    assert override.path == "/v1beta/models/gemini-2.5-pro:generateContent"
    v1 = GeminiCodec(GeminiConfig(model="m", api_key="k", api_version="v1"))
    assert v1.encode(request, stream=False).path == "/v1/models/m:generateContent"


def test_tool_round_trip_echoes_the_call_with_its_signature() -> None:
    call = ToolUse(
        id="a1b2",
        name="get_weather",
        input={"city": "Paris"},
        provider_metadata={THOUGHT_SIGNATURE_KEY: "CiIBVKhc7s"},
    )
    history = [
        Message.user("Weather in Paris?"),
        Message.assistant([call]),
        Message.tool_results([ToolResult(tool_use_id="a1b2", content="18°C, cloudy")]),
    ]
    _, contents = encode_contents(history)
    assert contents[1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {
                        "id": "a1b2",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    },
                    "thoughtSignature": "CiIBVKhc7s",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "a1b2",
                        "name": "get_weather",
                        "response": {"output": "18°C, cloudy"},
                    }
                }
            ],
        },
    ]


def test_a_call_without_id_is_answered_by_name_only() -> None:
    call = ToolUse(id="call_x", name="lookup", input={}, provider_metadata={SYNTHETIC_ID_KEY: True})
    history = [
        Message.user("go"),
        Message.assistant([call]),
        Message.tool_results([ToolResult.error("boom", tool_use_id="call_x")]),
        Message.user("and now?"),
    ]
    _, contents = encode_contents(history)
    assert contents[1]["parts"] == [{"functionCall": {"name": "lookup", "args": {}}}]
    # The results turn and the next user message merge: roles must alternate.
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "lookup", "response": {"error": "boom"}}},
            {"text": "and now?"},
        ],
    }
    assert len(contents) == 3


def test_a_result_for_an_unknown_call_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequest, match="no earlier assistant turn"):
        encode_contents([Message.tool_results([ToolResult(tool_use_id="nope", content="x")])])


def test_a_signed_text_part_decodes_onto_its_text_and_goes_back_unchanged() -> None:
    body = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "plan", "thought": True},
                        {"text": "It is "},
                        {"text": "sunny.", "thoughtSignature": "c2lnLXRleHQ="},
                        {"text": " Bye."},
                        {"text": "", "thoughtSignature": "c2lnLWVtcHR5"},
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    response = decode_response(body)
    # A signed part ends its text block: the block keeps the signature; an empty signed part
    # after unsigned text signs that text (as a whole response would have carried it).
    assert response.content == (
        Text(text="It is sunny.", provider_metadata={THOUGHT_SIGNATURE_KEY: "c2lnLXRleHQ="}),
        Text(text=" Bye.", provider_metadata={THOUGHT_SIGNATURE_KEY: "c2lnLWVtcHR5"}),
    )
    assert response.text == "It is sunny. Bye."
    _, contents = encode_contents([Message.user("q"), Message.assistant(response.content)])
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "It is sunny.", "thoughtSignature": "c2lnLXRleHQ="},
            {"text": " Bye.", "thoughtSignature": "c2lnLWVtcHR5"},
        ],
    }


def test_an_empty_signed_text_is_echoed_and_an_unsigned_one_dropped() -> None:
    signed = Text(text="", provider_metadata={THOUGHT_SIGNATURE_KEY: "c2ln"})
    other = Text(text="", provider_metadata={"openai_something": "x"})
    history = [Message.user("q"), Message.assistant([other, signed, Text(text="")])]
    _, contents = encode_contents(history)
    assert contents[1] == {"role": "model", "parts": [{"text": "", "thoughtSignature": "c2ln"}]}
    only_signed = decode_response(
        {"candidates": [{"content": {"parts": [{"text": "", "thoughtSignature": "c2ln"}]}}]}
    )
    assert only_signed.content == (signed,)


def test_foreign_and_own_thinking_is_dropped() -> None:
    history = [
        Message.user("q"),
        Message.assistant([Thinking(text="hmm", signature="anthropic-sig"), Text(text="a")]),
    ]
    _, contents = encode_contents(history)
    assert contents[1] == {"role": "model", "parts": [{"text": "a"}]}


def test_a_signed_thought_part_is_kept_in_place_and_goes_back_unchanged() -> None:
    signature = {THOUGHT_SIGNATURE_KEY: "c2lnLXRob3VnaHQ="}
    body = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "unsigned musing", "thought": True},
                        {"text": "Let me look."},
                        {
                            "text": "Need the weather.",
                            "thought": True,
                            **{"thoughtSignature": "c2lnLXRob3VnaHQ="},
                        },
                        {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}},
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    response = decode_response(body)
    assert response.content == (
        Text(text="Let me look."),
        Thinking(text="Need the weather.", provider_metadata=signature),
        ToolUse(id="c1", name="get_weather", input={}),
    )
    assert response.thinking == "unsigned musingNeed the weather."
    assert response.text == "Let me look."
    _, contents = encode_contents([Message.user("q"), Message.assistant(response.content)])
    # Exactly the part it came on: thought, text and signature; the unsigned one is not sent.
    assert contents[1]["parts"] == [
        {"text": "Let me look."},
        {"text": "Need the weather.", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="},
        {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}},
    ]


def test_a_signed_gemini_thought_is_dropped_by_the_other_providers() -> None:
    from kova.providers.anthropic._convert import encode_messages as anthropic_messages
    from kova.providers.bedrock import BedrockConfig
    from kova.providers.bedrock._convert import encode_messages as bedrock_messages

    thought = Thinking(text="secret plan", provider_metadata={THOUGHT_SIGNATURE_KEY: "c2ln"})
    history = [Message.user("q"), Message.assistant([thought, Text(text="a")])]
    bedrock = BedrockConfig(
        region="us-east-1", model_id="m", access_key_id="A", secret_access_key="S"
    )
    assert "secret plan" not in json.dumps(anthropic_messages(history))
    assert "secret plan" not in json.dumps(bedrock_messages(history, bedrock))


def test_images_by_url_and_in_tool_results() -> None:
    url_image = Image(url="gs://bucket/cat.png", media_type="image/png")
    call = ToolUse(id="c1", name="shot", input={})
    history = [
        Message.user([url_image]),
        Message.assistant([call]),
        Message.tool_results(
            [
                ToolResult(
                    tool_use_id="c1",
                    content=(Text(text="here"), Image(media_type="image/jpeg", data="AAAA")),
                )
            ]
        ),
    ]
    _, contents = encode_contents(history)
    assert contents[0]["parts"] == [
        {"fileData": {"mimeType": "image/png", "fileUri": "gs://bucket/cat.png"}}
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"id": "c1", "name": "shot", "response": {"output": "here"}}},
        {"inlineData": {"mimeType": "image/jpeg", "data": "AAAA"}},
    ]


def test_structured_output_sends_a_sanitized_schema() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    request = ChatRequest.of(
        "q", config=InferenceConfig(response_format=ResponseFormat.named("answer", schema))
    )
    generation = encode_request(request, CONFIG)["generationConfig"]
    assert generation == {
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {"answer": {"type": "STRING"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    }


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (GeminiConfig(model="m", api_key="k"), None),
        (GeminiConfig(model="m", api_key="k", thinking_budget=0), {"thinkingBudget": 0}),
        (
            GeminiConfig(model="m", api_key="k", thinking_budget=-1),
            {"thinkingBudget": -1, "includeThoughts": True},
        ),
        (
            GeminiConfig(model="m", api_key="k", thinking_level="low"),
            {"thinkingLevel": "LOW", "includeThoughts": True},
        ),
        (
            GeminiConfig(model="m", api_key="k", thinking_budget=512, include_thoughts=False),
            {"thinkingBudget": 512},
        ),
    ],
)
def test_thinking_config(config: GeminiConfig, expected: object) -> None:
    generation = encode_request(ChatRequest.of("q"), config).get("generationConfig")
    assert (generation or {}).get("thinkingConfig") == expected


def test_config_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="not both"):
        GeminiConfig(model="m", api_key="k", thinking_budget=1, thinking_level="high")
    with pytest.raises(ValueError, match="thinking_budget"):
        GeminiConfig(model="m", api_key="k", thinking_budget=-2)
    with pytest.raises(ValueError, match="thinking_level"):
        GeminiConfig(model="m", api_key="k", thinking_level="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        GeminiConfig(model="")
    assert GeminiConfig(model="m").timeout == 60.0


def test_api_key_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert GeminiConfig(model="m").api_key is None
    monkeypatch.setenv("GOOGLE_API_KEY", "google")
    assert GeminiConfig(model="m").api_key is not None
    assert GeminiConfig(model="m").api_key.reveal() == "google"  # type: ignore[union-attr]
    monkeypatch.setenv("GEMINI_API_KEY", "gemini")
    assert GeminiConfig(model="m").api_key.reveal() == "gemini"  # type: ignore[union-attr]
    assert GeminiConfig(model="m", api_key="arg").api_key.reveal() == "arg"  # type: ignore[union-attr]
    assert "gemini" not in repr(GeminiConfig(model="m"))


def test_decode_response_thinking_calls_and_usage() -> None:
    body = {
        "candidates": [
            {
                "index": 0,
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Let me check the weather…", "thought": True},
                        {"text": "Checking."},
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "CiIBVKhc7s",
                        },
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 57,
            "candidatesTokenCount": 15,
            "thoughtsTokenCount": 120,
            "totalTokenCount": 192,
            "cachedContentTokenCount": 7,
        },
        "modelVersion": "gemini-2.5-flash",
    }
    response = decode_response(body)
    assert response.thinking == "Let me check the weather…"
    assert response.text == "Checking."
    assert response.stop_reason == StopReason.TOOL_USE
    (call,) = response.tool_uses
    assert call.name == "get_weather"
    assert call.input == {"city": "Paris"}
    assert call.provider_metadata is not None
    assert call.provider_metadata[THOUGHT_SIGNATURE_KEY] == "CiIBVKhc7s"
    assert call.provider_metadata[SYNTHETIC_ID_KEY] is True
    assert response.usage == Usage(
        input_tokens=57,
        output_tokens=135,
        total_tokens=192,
        cache_read_tokens=7,
        reasoning_tokens=120,
    )
    # The same response decodes to the same (stable) id.
    assert decode_response(body).tool_uses[0].id == call.id
    # ...and goes back exactly as it came (id not sent, signature kept).
    _, contents = encode_contents([Message.user("q"), Message.assistant(response.content)])
    assert contents[1]["parts"][1] == body["candidates"][0]["content"]["parts"][2]  # type: ignore[index]


@pytest.mark.parametrize(
    ("reason", "calls", "expected"),
    [
        ("STOP", False, StopReason.END_TURN),
        ("STOP", True, StopReason.TOOL_USE),
        (None, False, StopReason.END_TURN),
        ("MAX_TOKENS", False, StopReason.MAX_TOKENS),
        ("MAX_TOKENS", True, StopReason.MAX_TOKENS),
        ("SAFETY", False, StopReason.unknown("SAFETY")),
        ("MALFORMED_FUNCTION_CALL", False, StopReason.unknown("MALFORMED_FUNCTION_CALL")),
    ],
)
def test_finish_reasons(reason: str | None, calls: bool, expected: StopReason) -> None:
    assert finish_reason_to_stop(reason, has_tool_calls=calls) == expected


def test_blocked_prompt_and_safety_without_content() -> None:
    blocked = decode_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked.content == ()
    assert blocked.stop_reason == StopReason.unknown("blocked:SAFETY")
    safety = decode_response({"candidates": [{"finishReason": "SAFETY", "index": 0}]})
    assert safety.stop_reason == StopReason.unknown("SAFETY")


@pytest.mark.parametrize(
    "body",
    [
        "text",
        {"candidates": "x"},
        {"candidates": [1]},
        {"candidates": [{"content": "x"}]},
        {"candidates": [{"content": {"parts": [1]}}]},
        {"candidates": [{"content": {"parts": [{"text": 3}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": "[]"}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
    ],
)
def test_malformed_responses_are_invalid_response(body: object) -> None:
    with pytest.raises(InvalidResponse):
        decode_response(body)  # type: ignore[arg-type]


def test_error_body_in_a_200() -> None:
    with pytest.raises(RateLimited):
        decode_response(
            {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
        )


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        ("RESOURCE_EXHAUSTED", RateLimited),
        ("UNAVAILABLE", ProviderOverloaded),
        ("PERMISSION_DENIED", ProviderAuthError),
        ("INVALID_ARGUMENT", InvalidRequest),
        ("FAILED_PRECONDITION", InvalidRequest),
        ("NOT_FOUND", ModelNotFound),
        ("UNAUTHENTICATED", ProviderAuthError),
        ("INTERNAL", ProviderOverloaded),
        ("DEADLINE_EXCEEDED", ProviderOverloaded),
    ],
)
def test_error_statuses_are_classified(status: str, error_class: type[Exception]) -> None:
    # An error object without a code (as some stream errors come) is classified by status.
    assert isinstance(stream_error({"message": "m", "status": status}), error_class)


def test_error_details_with_retry_info() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "Quota exceeded",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "57.25s"},
            ],
        }
    }
    details = error_details(body)
    assert details.error_type == "RESOURCE_EXHAUSTED"
    assert details.message == "Quota exceeded"
    assert details.retry_after == 57.25
    assert error_details([body]).retry_after == 57.25  # the array-wrapped form
    assert error_details("garbage").message is None
    assert error_details({"error": "plain"}).message == "plain"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("37s", 37.0), ("0.5s", 0.5), ("s", None), ("37", None), (37, None), ("-1s", None)],
)
def test_parse_retry_delay(value: object, seconds: float | None) -> None:
    assert parse_retry_delay(value) == seconds


def test_count_tokens_request_forms() -> None:
    codec = GeminiCodec(CONFIG)
    simple = codec.encode_count_tokens(ChatRequest.of("hi"))
    assert simple is not None
    assert simple.path == "/v1beta/models/gemini-2.5-flash:countTokens"
    assert simple.body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    full = codec.encode_count_tokens(
        ChatRequest.of([Message.system("s"), Message.user("hi")], tools=[WEATHER])
    )
    assert full is not None
    assert isinstance(full.body, dict)
    inner = full.body["generateContentRequest"]
    assert inner["model"] == "models/gemini-2.5-flash"  # type: ignore[index,call-overload]
    assert set(inner) == {"model", "contents", "systemInstruction", "tools"}  # type: ignore[arg-type]
    assert codec.decode_count_tokens({"totalTokens": 31}) == 31
    with pytest.raises(InvalidResponse):
        codec.decode_count_tokens({"totalTokens": "31"})


def test_model_pages() -> None:
    codec = GeminiCodec(CONFIG)
    first = codec.encode_list_models(None)
    assert first is not None
    assert first.method == "GET"
    assert first.path == "/v1beta/models"
    assert "pageToken" not in first.query
    nxt = codec.encode_list_models("tok")
    assert nxt is not None
    assert nxt.query["pageToken"] == "tok"
    page = codec.decode_list_models(
        {
            "models": [{"name": "models/gemini-2.5-flash", "displayName": "Gemini 2.5 Flash"}],
            "nextPageToken": "n",
        }
    )
    assert page.models[0].id == "gemini-2.5-flash"
    assert page.models[0].display_name == "Gemini 2.5 Flash"
    assert page.next_cursor == "n"
    assert codec.decode_list_models({}).next_cursor is None


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"model": 123}, TypeError, "model must be a string"),
        ({"base_url": "localhost:8080"}, ValueError, "base_url must be an http"),
        ({"base_url": "ftp://example.com"}, ValueError, "base_url must be an http"),
        ({"base_url": 8080}, TypeError, "base_url must be a string"),
        ({"thinking_budget": "1024"}, TypeError, "thinking_budget must be an int"),
        ({"thinking_budget": 1.5}, TypeError, "thinking_budget must be an int"),
        ({"thinking_budget": True}, TypeError, "thinking_budget must be an int"),
        ({"timeout": "60"}, TypeError, "timeout must be a number"),
        ({"temperature": "hot"}, TypeError, "temperature must be a number"),
        ({"include_thoughts": "yes"}, TypeError, "include_thoughts must be a bool"),
        ({"extra_headers": {"x-trace": 1}}, TypeError, "extra_headers"),
    ],
)
def test_bad_config_values_are_clear_errors(
    fields: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        GeminiConfig(**{"model": "m", "api_key": "k", **fields})  # type: ignore[arg-type]


def test_a_provider_takes_its_config() -> None:
    with pytest.raises(TypeError, match="GeminiConfig"):
        GeminiProvider("gemini-2.5-flash")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="GeminiEmbeddingConfig"):
        GeminiEmbeddingProvider(GeminiConfig(model="m", api_key="k"))  # type: ignore[arg-type]


def test_embedding_config_validation() -> None:
    # batchEmbedContents takes at most 100 requests.
    with pytest.raises(ValueError, match="batch_size"):
        GeminiEmbeddingConfig(api_key="k", batch_size=101)
    with pytest.raises(ValueError, match="base_url must be an http"):
        GeminiEmbeddingConfig(api_key="k", base_url="generativelanguage.googleapis.com")
    with pytest.raises(TypeError, match="model must be a string"):
        GeminiEmbeddingConfig(api_key="k", model=7)  # type: ignore[arg-type]


def _foreign_loop() -> list[Message]:
    # A tool loop another provider ran (no Gemini signatures), then handed to Gemini.
    return [
        Message.user("Weather in Paris and Rome?"),
        Message.assistant(
            [
                ToolUse(id="toolu_1", name="get_weather", input={"city": "Paris"}),
                ToolUse(id="toolu_2", name="get_weather", input={"city": "Rome"}),
            ]
        ),
        Message.tool_results(
            [
                ToolResult(tool_use_id="toolu_1", content="18°C"),
                ToolResult(tool_use_id="toolu_2", content="24°C"),
            ]
        ),
        Message.assistant([ToolUse(id="toolu_3", name="get_time", input={})]),
        Message.tool_results([ToolResult(tool_use_id="toolu_3", content="noon")]),
    ]


def _signatures(contents: list[dict[str, object]]) -> list[object]:
    return [
        part.get("thoughtSignature")
        for content in contents
        if content["role"] == "model"
        for part in content["parts"]  # type: ignore[attr-defined]
        if "functionCall" in part
    ]


@pytest.mark.parametrize(
    "model", ["gemini-3-pro-preview", "gemini-3.5-flash", "gemini-flash-latest"]
)
def test_unsigned_calls_of_the_current_turn_carry_the_documented_placeholder(model: str) -> None:
    # Gemini 3 refuses a step of the current turn whose first functionCall has no signature;
    # Google documents this placeholder for calls Gemini did not make.
    request = ChatRequest.of(_foreign_loop(), config=InferenceConfig(model=model))
    body = encode_request(request, CONFIG)
    assert _signatures(body["contents"]) == [  # type: ignore[arg-type]
        FOREIGN_SIGNATURE,
        None,  # a parallel call after the first needs none
        FOREIGN_SIGNATURE,
    ]
    assert FOREIGN_SIGNATURE == "skip_thought_signature_validator"


def test_the_placeholder_is_only_for_unsigned_steps_of_the_current_turn_on_gemini_3() -> None:
    signed = ToolUse(
        id="fc_1", name="lookup", input={}, provider_metadata={THOUGHT_SIGNATURE_KEY: "c2ln"}
    )
    history = [
        *_foreign_loop(),
        Message.assistant([Text(text="done")]),
        Message.user("And now?"),  # a new turn: the earlier steps are not validated
        Message.assistant([signed]),
        Message.tool_results([ToolResult(tool_use_id="fc_1", content="x")]),
    ]
    gemini_3 = encode_request(
        ChatRequest.of(history, config=InferenceConfig(model="gemini-3-flash")), CONFIG
    )
    assert _signatures(gemini_3["contents"]) == [None, None, None, "c2ln"]  # type: ignore[arg-type]
    for model in ("gemini-2.5-flash", "gemini-2.0-flash", "models/gemini-1.5-pro"):
        older = ChatRequest.of(_foreign_loop(), config=InferenceConfig(model=model))
        assert _signatures(encode_request(older, CONFIG)["contents"]) == [None, None, None]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image", "file_data"),
    [
        (
            Image(url="https://example.com/cat.png"),
            {"mimeType": "image/png", "fileUri": "https://example.com/cat.png"},
        ),
        (
            Image(url="gs://bucket/photo.jpeg"),
            {"mimeType": "image/jpeg", "fileUri": "gs://bucket/photo.jpeg"},
        ),
        (
            Image(url="gs://bucket/photo.jpeg", media_type="image/webp"),
            {"mimeType": "image/webp", "fileUri": "gs://bucket/photo.jpeg"},
        ),
        # A Files API URI has no extension: the API reads the uploaded file's type.
        (
            Image(url="https://generativelanguage.googleapis.com/v1beta/files/abc123"),
            {"fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc123"},
        ),
    ],
)
def test_an_image_by_url_gets_the_mime_type_google_genai_would_send(
    image: Image, file_data: dict[str, str]
) -> None:
    # google-genai's Part.from_uri guesses the type from the URL when none is given; the API
    # wants one for anything but a Files API URI.
    _, contents = encode_contents([Message.user([image])])
    assert contents[0]["parts"] == [{"fileData": file_data}]


def test_an_image_given_as_a_data_url_goes_inline() -> None:
    # The form OpenAI users write: Gemini's fileData takes no data URL, inlineData does.
    image = Image(url="data:image/jpeg;base64,/9j/4AAQ")
    _, contents = encode_contents([Message.user([image])])
    # In the URL-safe alphabet google-genai writes bytes in.
    assert contents[0]["parts"] == [{"inlineData": {"mimeType": "image/jpeg", "data": "_9j_4AAQ"}}]


def test_a_thinking_level_in_the_api_spelling_is_taken() -> None:
    # Google's docs and google-genai's ThinkingLevel write it upper-case.
    config = GeminiConfig(model="m", api_key="k", thinking_level="HIGH")  # type: ignore[arg-type]
    assert config.thinking_level == "high"
    assert config.thinking_config() == {"thinkingLevel": "HIGH", "includeThoughts": True}
