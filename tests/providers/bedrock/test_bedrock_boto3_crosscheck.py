"""Cross-checks with boto3's ``bedrock-runtime`` client (a dev dependency): it reads the fake's
Converse and ConverseStream replies to the same text, tool calls, reasoning and usage kova
reads, and for the same conversation it sends the same JSON body kova sends; the fake verifies
both signatures with botocore."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    InvalidResponse,
    Message,
    ProviderAuthError,
    ProviderErrorClass,
    RedactedThinking,
    ResponseFormat,
    StopReason,
    Text,
    TextDelta,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ModelResponse
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.testing import ErrorReply, FakeBedrockServer, Script, open_bedrock_server
from kova.testing._http_server import FakeStream, RecordedRequest, serve_http
from kova.testing._wire.bedrock import event_message

if TYPE_CHECKING:
    from collections.abc import Callable

boto3 = pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402
from botocore.parsers import ResponseParserError  # noqa: E402

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
REPLY = ModelResponse(
    content=(
        Thinking(text="The user wants weather.", signature="Eu0CCkgI"),
        RedactedThinking(data=base64.b64encode(b"secret reasoning").decode()),
        Text(text="Checking the weather."),
        ToolUse(id="tooluse_lAG_zP8Q", name="get_weather", input={"city": "Paris"}),
    ),
    stop_reason=StopReason.TOOL_USE,
    usage=Usage(input_tokens=571, output_tokens=91, cache_read_tokens=100),
)


@pytest.fixture(autouse=True)
def _no_ambient_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)


def _boto3_client(server: FakeBedrockServer) -> Any:
    from botocore.config import Config

    credentials = server.credentials
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server.base_url,
        aws_access_key_id=credentials["access_key_id"],
        aws_secret_access_key=credentials["secret_access_key"],
        config=Config(retries={"total_max_attempts": 1}),
    )


async def _in_thread(function: Callable[[], Any]) -> Any:
    return await trio.to_thread.run_sync(function)


async def test_boto3_reads_the_fakes_converse_reply() -> None:
    async with open_bedrock_server(Script([REPLY])) as server:
        client = _boto3_client(server)
        answer = await _in_thread(
            lambda: client.converse(
                modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Weather?"}]}]
            )
        )
    content = answer["output"]["message"]["content"]
    assert content[0]["reasoningContent"]["reasoningText"] == {
        "text": "The user wants weather.",
        "signature": "Eu0CCkgI",
    }
    assert content[1]["reasoningContent"]["redactedContent"] == b"secret reasoning"
    assert content[2] == {"text": "Checking the weather."}
    assert content[3]["toolUse"] == {
        "toolUseId": "tooluse_lAG_zP8Q",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert answer["stopReason"] == "tool_use"
    assert answer["usage"]["inputTokens"] == 471
    assert answer["usage"]["cacheReadInputTokens"] == 100
    assert answer["usage"]["outputTokens"] == 91


async def test_boto3_and_kova_read_the_same_stream() -> None:
    async with open_bedrock_server(Script([REPLY, REPLY])) as server:
        client = _boto3_client(server)

        def read_with_boto3() -> list[dict[str, Any]]:
            answer = client.converse_stream(
                modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Weather?"}]}]
            )
            return list(answer["stream"])

        events = await _in_thread(read_with_boto3)
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                **server.credentials,
            )
        )
        async with provider.open():
            kova_response = await _collect_response(provider)
    text = "".join(
        e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e
    )
    reasoning = [
        e["contentBlockDelta"]["delta"]["reasoningContent"]
        for e in events
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    tool_input = "".join(
        e["contentBlockDelta"]["delta"]["toolUse"]["input"]
        for e in events
        if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})
    )
    starts = [
        e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e
    ]
    stop = next(e["messageStop"] for e in events if "messageStop" in e)
    usage = next(e["metadata"]["usage"] for e in events if "metadata" in e)
    assert text == kova_response["text"] == "Checking the weather."
    assert "".join(r.get("text", "") for r in reasoning) == kova_response["thinking"]
    assert {"signature": "Eu0CCkgI"} in reasoning
    assert {"redactedContent": b"secret reasoning"} in reasoning
    assert json.loads(tool_input) == kova_response["tool_input"] == {"city": "Paris"}
    assert starts == [{"toolUseId": "tooluse_lAG_zP8Q", "name": "get_weather"}]
    assert stop["stopReason"] == "tool_use"
    assert usage["inputTokens"] + usage["cacheReadInputTokens"] == 571
    assert kova_response["usage"] == REPLY.usage
    assert kova_response["signed"] == [REPLY.content[0], REPLY.content[1]]


async def _collect_response(provider: BedrockProvider) -> dict[str, Any]:
    from kova import SignedThinking, TextDelta, ThinkingDelta
    from kova.providers import ToolUseDelta, UsageEvent

    result: dict[str, Any] = {"text": "", "thinking": "", "tool_input": "", "signed": []}
    async with provider.chat_completion_stream(ChatRequest.of("Weather?")) as stream:
        async for batch in stream:
            for event in batch:
                if isinstance(event, TextDelta):
                    result["text"] += event.text
                elif isinstance(event, ThinkingDelta):
                    result["thinking"] += event.text
                elif isinstance(event, ToolUseDelta):
                    result["tool_input"] += event.partial_json
                elif isinstance(event, SignedThinking):
                    result["signed"].append(event.block)
                elif isinstance(event, UsageEvent):
                    result["usage"] = event.usage
    result["tool_input"] = json.loads(result["tool_input"])
    return result


CONVERSATION = [
    Message.system("You are terse."),
    Message.user([Text(text="Weather in Paris?"), Image(media_type="image/png", data=PNG)]),
    Message.assistant(
        [
            Thinking(text="Need weather", signature="Eu0CCkgI"),
            Text(text="Checking."),
            ToolUse(id="tooluse_1", name="get_weather", input={"city": "Paris"}),
        ]
    ),
    Message.tool_results([ToolResult(tool_use_id="tooluse_1", content="18°C, cloudy")]),
]

BOTO3_PARAMS: dict[str, Any] = {
    "modelId": MODEL,
    "system": [{"text": "You are terse."}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"text": "Weather in Paris?"},
                {"image": {"format": "png", "source": {"bytes": base64.b64decode(PNG)}}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {"text": "Need weather", "signature": "Eu0CCkgI"}
                    }
                },
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
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18°C, cloudy"}]}}
            ],
        },
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
                    "inputSchema": {"json": WEATHER_SCHEMA},
                }
            }
        ]
    },
    "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
    "outputConfig": {
        "textFormat": {
            "type": "json_schema",
            "structure": {
                "jsonSchema": {
                    "name": "Weather",
                    "schema": json.dumps(WEATHER_SCHEMA, separators=(",", ":")),
                }
            },
        }
    },
}


@pytest.mark.parametrize("stream", [False, True])
async def test_kova_sends_the_body_boto3_sends(stream: bool) -> None:
    replies = [ModelResponse(content=(Text(text="ok"),), stop_reason=StopReason.END_TURN)] * 2
    async with open_bedrock_server(Script(replies)) as server:
        client = _boto3_client(server)

        def call_boto3() -> None:
            if stream:
                list(client.converse_stream(**BOTO3_PARAMS)["stream"])
            else:
                client.converse(**BOTO3_PARAMS)

        await _in_thread(call_boto3)
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                additional_model_request_fields={
                    "thinking": {"type": "enabled", "budget_tokens": 2048}
                },
                **server.credentials,
            )
        )
        request = ChatRequest.of(
            CONVERSATION,
            tools=[
                ToolDefinition(
                    name="get_weather", description="Current weather", parameters=WEATHER_SCHEMA
                )
            ],
            config=InferenceConfig(
                max_tokens=1024,
                temperature=0.5,
                top_p=0.9,
                stop_sequences=["END"],
                response_format=ResponseFormat(name="Weather", schema=WEATHER_SCHEMA),
            ),
        )
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    async for _ in batches:
                        pass
            else:
                await provider.chat_completion(request)
    boto3_request, kova_request = server.converse_requests()
    assert kova_request.path == boto3_request.path
    boto3_body, kova_body = boto3_request.json(), kova_request.json()
    assert isinstance(boto3_body, dict)
    assert isinstance(kova_body, dict)
    for field in sorted(boto3_body.keys() | kova_body.keys()):
        assert kova_body.get(field) == boto3_body.get(field), field
    # Both were signed for service "bedrock" and verified by the fake with botocore.
    for recorded in (boto3_request, kova_request):
        assert "/bedrock/aws4_request" in recorded.headers["authorization"]


async def test_count_tokens_body_and_answer_match_boto3() -> None:
    async with open_bedrock_server(Script([]), count_tokens=lambda m, t: 77) as server:
        client = _boto3_client(server)
        converse = {
            key: BOTO3_PARAMS[key]
            for key in ("messages", "system", "toolConfig", "additionalModelRequestFields")
        }
        answer = await _in_thread(
            lambda: client.count_tokens(modelId=MODEL, input={"converse": converse})
        )
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                additional_model_request_fields={
                    "thinking": {"type": "enabled", "budget_tokens": 2048}
                },
                **server.credentials,
            )
        )
        tools = [
            ToolDefinition(
                name="get_weather", description="Current weather", parameters=WEATHER_SCHEMA
            )
        ]
        async with provider.open():
            tokens = await provider.count_tokens(ChatRequest.of(CONVERSATION, tools=tools))
    assert answer["inputTokens"] == tokens == 77
    boto3_request, kova_request = server.requests
    assert kova_request.path == boto3_request.path
    assert kova_request.json() == boto3_request.json()


async def _streamed_text(provider: BedrockProvider) -> str:
    text = ""
    async with provider.chat_completion_stream(ChatRequest.of("Hi")) as stream:
        async for batch in stream:
            text += "".join(event.text for event in batch if isinstance(event, TextDelta))
    return text


def _frames_with_start(start: dict[str, Any]) -> list[bytes]:
    return [
        event_message("messageStart", {"role": "assistant"}),
        event_message("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
        event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello"}}),
        event_message("contentBlockStop", {"contentBlockIndex": 0}),
        event_message("messageStop", {"stopReason": "end_turn"}),
    ]


@pytest.mark.parametrize("start", [{"futureBlock": {"kind": "x"}}, {}], ids=["newer", "empty"])
async def test_a_block_start_kova_does_not_know_is_read_as_boto3_reads_it(
    start: dict[str, Any],
) -> None:
    async def handler(request: RecordedRequest) -> FakeStream:
        return FakeStream(
            headers={"content-type": "application/vnd.amazon.eventstream"},
            chunks=_frames_with_start(start),
        )

    async with trio.open_nursery() as nursery:
        url = await nursery.start(serve_http, handler)
        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
        )

        def read_with_boto3() -> str:
            answer = client.converse_stream(
                modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Hi"}]}]
            )
            text = ""
            try:
                for event in answer["stream"]:
                    text += event.get("contentBlockDelta", {}).get("delta", {}).get("text", "")
            finally:
                answer["stream"].close()  # boto3 leaves a refused stream's socket open
            return text

        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=url,
                access_key_id="AKIDEXAMPLE",
                secret_access_key="secret",
            )
        )
        async with provider.open():
            if start:
                assert await _in_thread(read_with_boto3) == "Hello"
                assert await _streamed_text(provider) == "Hello"
            else:
                with pytest.raises(ResponseParserError, match="one and only one member"):
                    await _in_thread(read_with_boto3)
                with pytest.raises(InvalidResponse, match="empty start"):
                    await _streamed_text(provider)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("error_type", ["UnrecognizedClientException", "ExpiredTokenException"])
async def test_invalid_credentials_with_403_are_auth_invalid_as_boto3_names_them(
    error_type: str,
) -> None:
    replies = [
        ErrorReply(status_code=403, message="The security token is invalid", error_type=error_type)
    ] * 2
    async with open_bedrock_server(Script(replies)) as server:
        client = _boto3_client(server)

        def call_boto3() -> Any:
            try:
                client.converse(
                    modelId=MODEL, messages=[{"role": "user", "content": [{"text": "x"}]}]
                )
            except ClientError as exc:
                return exc.response
            raise AssertionError("boto3 did not raise")

        answer = await _in_thread(call_boto3)
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                **server.credentials,
            )
        )
        async with provider.open():
            with pytest.raises(ProviderAuthError) as caught:
                await provider.chat_completion(ChatRequest.of("x"))
    assert answer["Error"]["Code"] == caught.value.error_type == error_type
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == caught.value.status_code == 403
    assert caught.value.error_class is ProviderErrorClass.AUTH_INVALID


PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MEDIA = [
    Message.user(
        [
            Text(text="What do these say?"),
            Document(data=PDF, title="Invoice 7", citations=True),
            Document.from_text("plain notes"),
            Document(url="s3://bucket/contract.docx", media_type=DOCX),
            Audio(data=WAV),
            Audio(url="s3://bucket/call.mp3", format="mp3"),
            File("s3://bucket/clip.mp4", media_type="video/mp4"),
            File("s3://bucket/chart.png", media_type="image/png"),
        ]
    )
]
BOTO3_MEDIA: dict[str, Any] = {
    "modelId": MODEL,
    "messages": [
        {
            "role": "user",
            "content": [
                {"text": "What do these say?"},
                {
                    "document": {
                        "format": "pdf",
                        "name": "Invoice 7",
                        "source": {"bytes": PDF},
                        "citations": {"enabled": True},
                    }
                },
                {
                    "document": {
                        "format": "txt",
                        "name": "document-2",
                        "source": {"bytes": b"plain notes"},
                    }
                },
                {
                    "document": {
                        "format": "docx",
                        "name": "document-3",
                        "source": {"s3Location": {"uri": "s3://bucket/contract.docx"}},
                    }
                },
                {"audio": {"format": "wav", "source": {"bytes": WAV}}},
                {
                    "audio": {
                        "format": "mp3",
                        "source": {"s3Location": {"uri": "s3://bucket/call.mp3"}},
                    }
                },
                {
                    "video": {
                        "format": "mp4",
                        "source": {"s3Location": {"uri": "s3://bucket/clip.mp4"}},
                    }
                },
                {
                    "image": {
                        "format": "png",
                        "source": {"s3Location": {"uri": "s3://bucket/chart.png"}},
                    }
                },
            ],
        }
    ],
    "inferenceConfig": {"maxTokens": 256},
}


@pytest.mark.parametrize("stream", [False, True])
async def test_documents_audio_and_files_go_as_boto3_sends_them(stream: bool) -> None:
    replies = [ModelResponse(content=(Text(text="ok"),), stop_reason=StopReason.END_TURN)] * 2
    async with open_bedrock_server(Script(replies)) as server:
        client = _boto3_client(server)

        def call_boto3() -> None:
            if stream:
                list(client.converse_stream(**BOTO3_MEDIA)["stream"])
            else:
                client.converse(**BOTO3_MEDIA)

        await _in_thread(call_boto3)
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                **server.credentials,
            )
        )
        request = ChatRequest.of(MEDIA, config=InferenceConfig(max_tokens=256))
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    async for _ in batches:
                        pass
            else:
                await provider.chat_completion(request)
    boto3_request, kova_request = server.converse_requests()
    assert kova_request.json() == boto3_request.json()
