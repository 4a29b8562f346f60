"""Cross-checks with the official ``google-genai`` package (a dev dependency), both on kova's
fake server: kova sends the request body the SDK sends for the same conversation, and the SDK
reads the fake server's answers (JSON and SSE) to what kova reads, so the fake is faithful.

The SDK's synchronous client runs in a worker thread (``trio.to_thread``); the fake server
runs on trio. Two spellings differ without meaning anything: google-genai 3.x sends a few
nested fields in snake_case (``parameters_json_schema``, ``thinking_config`` members), which
the API's JSON parser accepts; kova sends the documented camelCase everywhere. The comparison
normalizes key case, nothing else. And the SDK re-encodes bytes (a ``thoughtSignature``, an
image) in URL-safe base64 where kova echoes the server's string unchanged; the test's bytes
encode the same in both alphabets.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import TYPE_CHECKING, Any, Literal

import pydantic
import pytest
import trio

from kova import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ModelResponse, ToolUseDelta, ToolUseStart, UsageEvent
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.gemini._convert import THOUGHT_SIGNATURE_KEY
from kova.testing import Script, StreamReply, open_gemini_server, reply_text

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")

if TYPE_CHECKING:
    from collections.abc import Callable

    from kova.testing import FakeGeminiServer

IMAGE = b"PNG-fake-image-data"
SIGNATURE = b"signature-bytes-01"
TEXT_SIGNATURE = b"text-signature-02"
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
WEATHER = ToolDefinition(
    name="get_weather", description="Current weather", parameters=WEATHER_PARAMETERS
)


def _camel(key: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)


def normalized(value: Any) -> Any:
    """Key case normalized (see the module docstring); an empty ``generationConfig`` (the
    SDK sends ``{}`` when a config object is passed at all) is the same as none."""
    if isinstance(value, dict):
        return {
            _camel(k): normalized(v) for k, v in value.items() if v != {} or k != "generationConfig"
        }
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _sdk_client(server: FakeGeminiServer) -> Any:
    return genai.Client(
        api_key="sdk-key",
        http_options=types.HttpOptions(base_url=server.base_url, api_version="v1beta"),
    )


# (kova request, kova config, SDK contents, SDK config) per conversation.
Case = tuple[ChatRequest, GeminiConfig, list[Any], Any]


def _text_case() -> Case:
    return (
        ChatRequest.of([Message.system("You are terse."), Message.user("Hello")]),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [types.Content(role="user", parts=[types.Part(text="Hello")])],
        types.GenerateContentConfig(system_instruction="You are terse."),
    )


def _sampling_case() -> Case:
    return (
        ChatRequest.of(
            "Hello",
            config=InferenceConfig(
                temperature=0.2, top_p=0.9, max_tokens=256, stop_sequences=["END"]
            ),
        ),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [types.Content(role="user", parts=[types.Part(text="Hello")])],
        types.GenerateContentConfig(
            temperature=0.2, top_p=0.9, max_output_tokens=256, stop_sequences=["END"]
        ),
    )


def _tools_case() -> Case:
    return (
        ChatRequest.of("Weather in Paris?", tools=[WEATHER]),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])],
        types.GenerateContentConfig(
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name="get_weather",
                            description="Current weather",
                            parameters_json_schema=WEATHER_PARAMETERS,
                        )
                    ]
                )
            ]
        ),
    )


def _round_trip_case() -> Case:
    call = ToolUse(
        id="fc_1",
        name="get_weather",
        input={"city": "Paris"},
        provider_metadata={THOUGHT_SIGNATURE_KEY: _b64(SIGNATURE)},
    )
    history = [
        Message.user("Weather in Paris?"),
        Message.assistant([Text(text="Let me check."), call]),
        Message.tool_results([ToolResult(tool_use_id="fc_1", content="18°C, cloudy")]),
    ]
    contents = [
        types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]),
        types.Content(
            role="model",
            parts=[
                types.Part(text="Let me check."),
                types.Part(
                    function_call=types.FunctionCall(
                        id="fc_1", name="get_weather", args={"city": "Paris"}
                    ),
                    thought_signature=SIGNATURE,
                ),
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="fc_1", name="get_weather", response={"output": "18°C, cloudy"}
                    )
                )
            ],
        ),
    ]
    return (
        ChatRequest.of(history),
        GeminiConfig(model="gemini-fake", api_key="k"),
        contents,
        types.GenerateContentConfig(),
    )


def _signed_text_case() -> Case:
    signed = {THOUGHT_SIGNATURE_KEY: _b64(TEXT_SIGNATURE)}
    history = [
        Message.user("Hi"),
        Message.assistant([Text(text="Hello! How can I help?", provider_metadata=signed)]),
        Message.user("Weather in Paris?"),
    ]
    contents = [
        types.Content(role="user", parts=[types.Part(text="Hi")]),
        types.Content(
            role="model",
            parts=[types.Part(text="Hello! How can I help?", thought_signature=TEXT_SIGNATURE)],
        ),
        types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]),
    ]
    return (
        ChatRequest.of(history),
        GeminiConfig(model="gemini-fake", api_key="k"),
        contents,
        types.GenerateContentConfig(),
    )


def _thinking_case() -> Case:
    return (
        ChatRequest.of("Think."),
        GeminiConfig(model="gemini-fake", api_key="k", thinking_budget=1024),
        [types.Content(role="user", parts=[types.Part(text="Think.")])],
        types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True)
        ),
    )


def _thinking_level_case() -> Case:
    return (
        ChatRequest.of("Think."),
        GeminiConfig(model="gemini-fake", api_key="k", thinking_level="low"),
        [types.Content(role="user", parts=[types.Part(text="Think.")])],
        types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_level="LOW", include_thoughts=True)
        ),
    )


def _structured_case() -> Case:
    return (
        ChatRequest.of(
            "Answer in JSON.",
            config=InferenceConfig(response_format=ResponseFormat.named("answer", SCHEMA)),
        ),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [types.Content(role="user", parts=[types.Part(text="Answer in JSON.")])],
        types.GenerateContentConfig(response_mime_type="application/json", response_schema=SCHEMA),
    )


class _City(pydantic.BaseModel):
    name: str
    country: str | None = None


class _Route(pydantic.BaseModel, extra="forbid"):
    route: str
    confidence: float = pydantic.Field(ge=0, le=1, description="how sure")
    kind: Literal["road", "rail"]
    stops: list[_City]
    home: _City | None = None


def _pydantic_structured_case() -> Case:
    # What users pass: a pydantic model's schema ($defs, Optional fields with a null default,
    # several properties whose order matters, additionalProperties false).
    schema = _Route.model_json_schema()
    return (
        ChatRequest.of(
            "Plan a route.",
            config=InferenceConfig(response_format=ResponseFormat.named("route", schema)),
        ),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [types.Content(role="user", parts=[types.Part(text="Plan a route.")])],
        # The SDK rewrites the schema it is given in place: it gets its own copy.
        types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=copy.deepcopy(schema)
        ),
    )


def _image_case() -> Case:
    return (
        ChatRequest.of(
            [
                Message.user(
                    [Text(text="What is this?"), Image(media_type="image/png", data=_b64(IMAGE))]
                )
            ]
        ),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [
            types.Content(
                role="user",
                parts=[
                    types.Part(text="What is this?"),
                    types.Part(inline_data=types.Blob(mime_type="image/png", data=IMAGE)),
                ],
            )
        ],
        types.GenerateContentConfig(),
    )


def _image_url_case() -> Case:
    # No type given: both guess it from the URL.
    url = "https://example.com/cat.png"
    return (
        ChatRequest.of([Message.user([Text(text="And this?"), Image(url=url)])]),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [
            types.Content(
                role="user",
                parts=[types.Part(text="And this?"), types.Part.from_uri(file_uri=url)],
            )
        ],
        types.GenerateContentConfig(),
    )


PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "


def _media_case() -> Case:
    # Documents, audio and files, inline and by URI, as Part.from_bytes / Part.from_uri.
    pdf_url = "https://example.com/report.pdf"
    file_uri = "https://generativelanguage.googleapis.com/v1beta/files/abc123"
    return (
        ChatRequest.of(
            [
                Message.user(
                    [
                        Text(text="Compare these."),
                        Document(data=PDF, title="Report"),
                        Document.from_text("plain notes"),
                        Document(url=pdf_url),
                        Audio(data=WAV),
                        Audio(url="gs://bucket/call.mp3", format="mp3"),
                        File(file_uri, media_type="video/mp4"),
                        File(file_uri),
                    ]
                )
            ]
        ),
        GeminiConfig(model="gemini-fake", api_key="k"),
        [
            types.Content(
                role="user",
                parts=[
                    types.Part(text="Compare these."),
                    types.Part.from_bytes(data=PDF, mime_type="application/pdf"),
                    types.Part.from_bytes(data=b"plain notes", mime_type="text/plain"),
                    types.Part.from_uri(file_uri=pdf_url, mime_type="application/pdf"),
                    types.Part.from_bytes(data=WAV, mime_type="audio/wav"),
                    types.Part.from_uri(file_uri="gs://bucket/call.mp3", mime_type="audio/mp3"),
                    types.Part.from_uri(file_uri=file_uri, mime_type="video/mp4"),
                    types.Part(file_data=types.FileData(file_uri=file_uri)),
                ],
            )
        ],
        types.GenerateContentConfig(),
    )


CASES: dict[str, Callable[[], Case]] = {
    "media": _media_case,
    "text": _text_case,
    "sampling": _sampling_case,
    "tools": _tools_case,
    "tool-round-trip": _round_trip_case,
    "signed-text": _signed_text_case,
    "thinking-budget": _thinking_case,
    "thinking-level": _thinking_level_case,
    "structured-output": _structured_case,
    "structured-output-pydantic": _pydantic_structured_case,
    "image": _image_case,
    "image-url": _image_url_case,
}


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("case", list(CASES))
async def test_request_bodies_equal_the_sdks(case: str, stream: bool) -> None:
    request, config, contents, sdk_config = CASES[case]()
    async with open_gemini_server(Script([reply_text("ok"), reply_text("ok")])) as server:
        provider = GeminiProvider(GeminiConfig(**{**_fields(config), "base_url": server.base_url}))
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    async for _ in batches:
                        pass
            else:
                await provider.chat_completion(request)
        client = _sdk_client(server)

        def sdk_call() -> None:
            if stream:
                for _ in client.models.generate_content_stream(
                    model="gemini-fake", contents=contents, config=sdk_config
                ):
                    pass
            else:
                client.models.generate_content(
                    model="gemini-fake", contents=contents, config=sdk_config
                )

        await trio.to_thread.run_sync(sdk_call)
    kova_request, sdk_request = server.requests
    assert kova_request.path == sdk_request.path
    assert kova_request.query == sdk_request.query
    kova_body, sdk_body = normalized(kova_request.json()), normalized(sdk_request.json())
    assert kova_body == sdk_body, json.dumps([kova_body, sdk_body])
    assert kova_request.headers["x-goog-api-key"] == "k"


def _fields(config: GeminiConfig) -> dict[str, Any]:
    import attrs

    values = attrs.asdict(config, recurse=False)
    values["api_key"] = config.api_key
    return values


FIRST = ModelResponse(
    content=(
        Text(
            text="Checking the weather in Paris for you.",
            provider_metadata={THOUGHT_SIGNATURE_KEY: _b64(TEXT_SIGNATURE)},
        ),
        ToolUse(
            id="fc_9",
            name="get_weather",
            input={"city": "Paris", "days": 2},
            provider_metadata={THOUGHT_SIGNATURE_KEY: _b64(SIGNATURE)},
        ),
    ),
    stop_reason=StopReason.TOOL_USE,
    usage=Usage(
        input_tokens=57,
        output_tokens=135,
        total_tokens=192,
        reasoning_tokens=120,
        cache_read_tokens=7,
    ),
    thinking="The user wants Paris weather.",
)


def _sdk_reading(
    responses: list[Any],
) -> tuple[str, str, list[tuple[Any, ...]], Any, list[bytes]]:
    text, thinking, calls = "", "", []
    text_signatures: list[bytes] = []
    usage = None
    for response in responses:
        if response.usage_metadata is not None:
            usage = response.usage_metadata
        for candidate in response.candidates or []:
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.function_call is not None:
                    calls.append(
                        (
                            part.function_call.id,
                            part.function_call.name,
                            dict(part.function_call.args or {}),
                            part.thought_signature,
                        )
                    )
                elif part.thought:
                    thinking += part.text or ""
                else:
                    text += part.text or ""
                    if part.thought_signature is not None:
                        text_signatures.append(part.thought_signature)
    return text, thinking, calls, usage, text_signatures


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_the_sdk_reads_the_fake_server_as_kova_does(stream: bool) -> None:
    replies = [StreamReply(response=FIRST, chunk_chars=6)] * 2
    async with open_gemini_server(Script(replies)) as server:
        provider = GeminiProvider(
            GeminiConfig(model="gemini-fake", base_url=server.base_url, api_key="k")
        )
        async with provider.open():
            if stream:
                events: list[Any] = []
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for batch in batches:
                        events.extend(batch)
                kova_text = "".join(e.text for e in events if isinstance(e, TextDelta))
                kova_text_signatures = [
                    e.provider_metadata[THOUGHT_SIGNATURE_KEY]
                    for e in events
                    if isinstance(e, TextDelta) and e.provider_metadata
                ]
                kova_thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
                starts = [e for e in events if isinstance(e, ToolUseStart)]
                deltas = [e for e in events if isinstance(e, ToolUseDelta)]
                import json

                kova_calls = [
                    (
                        s.id,
                        s.name,
                        json.loads(d.partial_json),
                        (s.provider_metadata or {}).get(THOUGHT_SIGNATURE_KEY),
                    )
                    for s, d in zip(starts, deltas, strict=True)
                ]
                kova_usage = [e for e in events if isinstance(e, UsageEvent)][-1].usage
            else:
                response = await provider.chat_completion(ChatRequest.of("q"))
                kova_text, kova_thinking = response.text, response.thinking or ""
                kova_text_signatures = [
                    b.provider_metadata[THOUGHT_SIGNATURE_KEY]
                    for b in response.content
                    if isinstance(b, Text) and b.provider_metadata
                ]
                kova_calls = [
                    (
                        u.id,
                        u.name,
                        dict(u.input),
                        (u.provider_metadata or {}).get(THOUGHT_SIGNATURE_KEY),
                    )
                    for u in response.tool_uses
                ]
                assert response.usage is not None
                kova_usage = response.usage
        client = _sdk_client(server)

        def sdk_call() -> list[Any]:
            if stream:
                return list(
                    client.models.generate_content_stream(model="gemini-fake", contents="q")
                )
            return [client.models.generate_content(model="gemini-fake", contents="q")]

        sdk_responses = await trio.to_thread.run_sync(sdk_call)
    text, thinking, calls, usage, text_signatures = _sdk_reading(sdk_responses)
    assert kova_text == text == "Checking the weather in Paris for you."
    # The text part's signature (streamed: on the text's last chunk) reads the same.
    assert [base64.b64decode(s) for s in kova_text_signatures] == text_signatures
    assert text_signatures == [TEXT_SIGNATURE]
    assert kova_thinking == thinking == "The user wants Paris weather."
    assert [(i, n, a) for i, n, a, _ in kova_calls] == [(i, n, a) for i, n, a, _ in calls]
    assert [base64.b64decode(s) for *_, s in kova_calls] == [s for *_, s in calls] == [SIGNATURE]
    assert usage.prompt_token_count == kova_usage.input_tokens
    assert usage.candidates_token_count + usage.thoughts_token_count == kova_usage.output_tokens
    assert usage.thoughts_token_count == kova_usage.reasoning_tokens
    assert usage.cached_content_token_count == kova_usage.cache_read_tokens
    assert usage.total_token_count == kova_usage.total_tokens
    if stream:
        assert sdk_responses[-1].candidates[0].finish_reason == types.FinishReason.STOP


THOUGHT_SIGNATURE = b"thought-signature-03"


async def test_a_signed_thought_goes_back_as_the_sdks_chat_sends_it() -> None:
    # google-genai's chat keeps the model's content as it came, thought parts included, and
    # sends it back on the next turn; kova keeps the signed thought part and sends the same.
    thought = Thinking(
        text="The user wants Paris weather.",
        provider_metadata={THOUGHT_SIGNATURE_KEY: _b64(THOUGHT_SIGNATURE)},
    )
    first = ModelResponse(
        content=(thought, Text(text="Sunny in Paris.")), stop_reason=StopReason.END_TURN
    )
    replies = [first, reply_text("ok"), first, reply_text("ok")]
    async with open_gemini_server(Script(replies)) as server:
        client = _sdk_client(server)

        def sdk_chat() -> None:
            chat = client.chats.create(model="gemini-fake")
            chat.send_message("Weather in Paris?")
            chat.send_message("And tomorrow?")

        await trio.to_thread.run_sync(sdk_chat)
        provider = GeminiProvider(
            GeminiConfig(model="gemini-fake", base_url=server.base_url, api_key="k")
        )
        async with provider.open():
            history = [Message.user("Weather in Paris?")]
            response = await provider.chat_completion(ChatRequest.of(history))
            assert response.content[0] == thought
            history += [Message.assistant(response.content), Message.user("And tomorrow?")]
            await provider.chat_completion(ChatRequest.of(history))
    sdk_second, kova_second = server.requests[1], server.requests[3]
    sdk_contents = normalized(sdk_second.json())["contents"]
    kova_contents = normalized(kova_second.json())["contents"]
    assert kova_contents == sdk_contents
    assert kova_contents[1]["parts"][0] == {
        "text": "The user wants Paris weather.",
        "thought": True,
        "thoughtSignature": _b64(THOUGHT_SIGNATURE),
    }
