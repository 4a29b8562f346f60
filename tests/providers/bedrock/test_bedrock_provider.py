"""BedrockProvider against the wire-level fake Bedrock on loopback (SigV4 verified by the
fake with botocore, real event-stream frames)."""

from __future__ import annotations

import json
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
import trio.testing

from kova import (
    InferenceConfig,
    InvalidRequest,
    InvalidResponse,
    Message,
    ModelNotFound,
    ProviderAuthError,
    ProviderError,
    ProviderErrorClass,
    ProviderOverloaded,
    RateLimited,
    ResponseFormat,
    SignedThinking,
    StopReason,
    StreamError,
    TextDelta,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova._models import ModelResponse, Text
from kova.providers import (
    ChatRequest,
    ErrorEvent,
    Provider,
    StopEvent,
    ToolUseDelta,
    ToolUseStart,
    UsageEvent,
)
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.testing import (
    ErrorReply,
    FakeBedrockServer,
    Script,
    StreamReply,
    open_bedrock_server,
    reply_text,
    reply_tool_calls,
)
from kova.testing._wire.bedrock import event_message

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    from kova.providers import StreamEvent

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine without AWS credentials: no variables, empty shared files, no IMDS."""
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


@asynccontextmanager
async def running(
    script: Script, *, config: dict[str, Any] | None = None, **server_args: Any
) -> AsyncIterator[tuple[FakeBedrockServer, BedrockProvider]]:
    async with open_bedrock_server(script, **server_args) as server:
        settings: dict[str, Any] = {"region": "us-east-1", "model_id": MODEL}
        settings["endpoint_url"] = server.base_url
        settings.update(config if config is not None else server.credentials)
        provider = BedrockProvider(BedrockConfig(**settings))
        async with provider.open():
            yield server, provider


async def collect(provider: BedrockProvider, request: ChatRequest) -> list[Sequence[StreamEvent]]:
    batches = []
    async with provider.chat_completion_stream(request) as stream:
        async for batch in stream:
            batches.append(batch)
    return batches


def flat(batches: list[Sequence[StreamEvent]]) -> list[StreamEvent]:
    return [event for batch in batches for event in batch]


def test_provider_implements_the_protocol() -> None:
    provider = BedrockProvider(
        BedrockConfig(region="us-east-1", model_id=MODEL, access_key_id="A", secret_access_key="S")
    )
    assert isinstance(provider, Provider)
    assert provider.name == "bedrock"
    assert provider.transport.base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"


def test_config_never_prints_credentials() -> None:
    config = BedrockConfig(
        region="us-east-1",
        model_id=MODEL,
        access_key_id="AKIAVISIBLE",
        secret_access_key="very-secret",
        session_token="token-1234",
        api_key="bedrock-key",
    )
    shown = repr(config) + repr(BedrockProvider(config))
    for value in ("AKIAVISIBLE", "very-secret", "token-1234", "bedrock-key"):
        assert value not in shown


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="go together"):
        BedrockConfig(region="us-east-1", model_id=MODEL, access_key_id="A")
    with pytest.raises(ValueError, match="non-empty"):
        BedrockConfig(region="", model_id=MODEL)
    with pytest.raises(ValueError, match="URL"):
        BedrockConfig(region="us-east-1", model_id=MODEL, endpoint_url="localhost:4566")
    china = BedrockConfig(region="cn-north-1", model_id=MODEL)
    assert china.runtime_url == "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
    assert china.control_url == "https://bedrock.cn-north-1.amazonaws.com.cn"


async def test_converse_round_trip() -> None:
    async with running(Script([reply_text("Hello!")])) as (server, provider):
        response = await provider.chat_completion(
            ChatRequest.of(
                [Message.system("Be terse."), Message.user("Hi")],
                config=InferenceConfig(max_tokens=100, temperature=0.2),
            )
        )
    assert response.text == "Hello!"
    assert response.stop_reason == StopReason.END_TURN
    assert response.usage == Usage(input_tokens=10, output_tokens=5)
    (request,) = server.converse_requests()
    assert request.path == "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"
    asked = server.script.requests[0]
    assert asked.messages == (Message.system("Be terse."), Message.user("Hi"))
    assert asked.config.max_tokens == 100
    assert asked.config.model == MODEL


async def test_stream_text_tool_call_reasoning_and_usage() -> None:
    reply = ModelResponse(
        content=(
            Thinking(text="Need the weather.", signature="sig-1"),
            Text(text="Checking."),
            ToolUse(id="tooluse_1", name="get_weather", input={"city": "Paris"}),
        ),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=40, output_tokens=9, cache_read_tokens=30),
    )
    async with running(Script([reply])) as (_, provider):
        events = flat(await collect(provider, ChatRequest.of("Weather?", tools=[WEATHER])))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking."
    assert SignedThinking(block=Thinking(text="Need the weather.", signature="sig-1")) in events
    assert ToolUseStart(index=2, id="tooluse_1", name="get_weather") in events
    arguments = "".join(e.partial_json for e in events if isinstance(e, ToolUseDelta))
    assert json.loads(arguments) == {"city": "Paris"}
    assert events[-2:] == [
        StopEvent(stop_reason=StopReason.TOOL_USE),
        UsageEvent(usage=Usage(input_tokens=40, output_tokens=9, cache_read_tokens=30)),
    ]


async def test_signed_reasoning_round_trips_through_history() -> None:
    first = ModelResponse(
        content=(
            Thinking(text="Need the weather.", signature="sig-1"),
            ToolUse(id="tooluse_1", name="get_weather", input={"city": "Paris"}),
        ),
        stop_reason=StopReason.TOOL_USE,
    )
    async with running(Script([first, reply_text("Sunny.")])) as (server, provider):
        response = await provider.chat_completion(ChatRequest.of("Weather?", tools=[WEATHER]))
        history = [
            Message.user("Weather?"),
            Message.assistant(response.content),
            Message.tool_results([ToolResult(tool_use_id="tooluse_1", content="18°C")]),
        ]
        await provider.chat_completion(ChatRequest.of(history, tools=[WEATHER]))
    second = server.converse_requests()[1].json()
    assert isinstance(second, dict)
    assert second["messages"][1]["content"][0] == {
        "reasoningContent": {"reasoningText": {"text": "Need the weather.", "signature": "sig-1"}}
    }
    assert second["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18°C"}]}}
    ]
    # The fake read the turn back as it was sent: the signed reasoning and the call.
    assert server.converse_requests()[1].messages[1] == history[1]


_C = ProviderErrorClass


@pytest.mark.parametrize(
    ("status", "error_type", "error_class", "kind"),
    [
        (400, "ValidationException", InvalidRequest, _C.INVALID_REQUEST),
        (403, "AccessDeniedException", ProviderAuthError, _C.AUTH_FORBIDDEN),
        # AWS sends these two with 403, but they mean invalid credentials: the type wins.
        (403, "UnrecognizedClientException", ProviderAuthError, _C.AUTH_INVALID),
        (403, "ExpiredTokenException", ProviderAuthError, _C.AUTH_INVALID),
        (404, "ResourceNotFoundException", ModelNotFound, _C.NOT_FOUND),
        (429, "ThrottlingException", RateLimited, _C.RATE_LIMITED),
        (429, "ModelNotReadyException", RateLimited, _C.RATE_LIMITED),
        (408, "ModelTimeoutException", ProviderOverloaded, _C.OVERLOADED),
        (500, "InternalServerException", ProviderOverloaded, _C.OVERLOADED),
        (503, "ServiceUnavailableException", ProviderOverloaded, _C.OVERLOADED),
        (400, "ServiceQuotaExceededException", InvalidRequest, _C.INVALID_REQUEST),
    ],
)
async def test_http_errors_are_classified_by_amzn_error_type(
    status: int, error_type: str, error_class: type[ProviderError], kind: ProviderErrorClass
) -> None:
    replies = [ErrorReply(status_code=status, message="nope", error_type=error_type)] * 2
    async with running(Script(replies)) as (_, provider):
        with pytest.raises(error_class) as caught:
            await provider.chat_completion(ChatRequest.of("hi"))
        assert caught.value.error_type == error_type
        assert caught.value.error_class is kind
        assert caught.value.status_code == status
        with pytest.raises(error_class) as streamed:
            async with provider.chat_completion_stream(ChatRequest.of("hi")):
                pass
        assert streamed.value.error_class is kind


async def test_exception_mid_stream_after_content_is_not_retryable() -> None:
    events = (
        TextDelta(text="Hel"),
        ErrorEvent(message="Too many tokens", error_type="throttlingException"),
    )
    reply = StreamReply(response=reply_text("x"), events=events)
    async with running(Script([reply])) as (_, provider):
        received: list[StreamEvent] = []
        with pytest.raises(RateLimited) as caught:
            async with provider.chat_completion_stream(ChatRequest.of("hi")) as stream:
                async for batch in stream:
                    received.extend(batch)
    assert received == [TextDelta(text="Hel")]
    assert caught.value.mid_stream
    assert caught.value.after_content
    assert not caught.value.is_retryable


async def test_exception_before_content_is_retryable() -> None:
    events = (ErrorEvent(message="busy", error_type="serviceUnavailableException"),)
    reply = StreamReply(response=reply_text("x"), events=events)
    async with running(Script([reply])) as (_, provider):
        with pytest.raises(ProviderOverloaded) as caught:
            await collect(provider, ChatRequest.of("hi"))
    assert caught.value.mid_stream
    assert caught.value.is_retryable


async def test_cut_stream_is_a_stream_error() -> None:
    reply = StreamReply(response=reply_text("Hello there"), cut_after=2)
    async with running(Script([reply])) as (_, provider):
        with pytest.raises(StreamError):
            await collect(provider, ChatRequest.of("hi"))


async def test_corrupted_frame_is_an_invalid_response() -> None:
    good = event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
    bad = bytearray(event_message("messageStop", {"stopReason": "end_turn"}))
    bad[-1] ^= 0xFF

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            headers={"content-type": "application/vnd.amazon.eventstream"},
            content=good + bytes(bad),
        )

    provider = BedrockProvider(
        BedrockConfig(region="us-east-1", model_id=MODEL, access_key_id="A", secret_access_key="S"),
        transport=httpx2.MockTransport(handler),
    )
    async with provider.open():
        with pytest.raises(InvalidResponse, match="CRC"):
            await collect(provider, ChatRequest.of("hi"))


async def test_an_error_named_only_in_its_body_is_read_from_the_body() -> None:
    # Some AWS front ends send no x-amzn-ErrorType: the body's __type (and its capitalised
    # Message) name the error then.
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = {"__type": "com.amazon.coral#ValidationException", "Message": "too long"}
        return httpx2.Response(400, json=body)

    provider = BedrockProvider(
        BedrockConfig(region="us-east-1", model_id=MODEL, access_key_id="A", secret_access_key="S"),
        transport=httpx2.MockTransport(handler),
    )
    async with provider.open():
        with pytest.raises(InvalidRequest, match="too long") as raised:
            await provider.chat_completion(ChatRequest.of("hi"))
    assert raised.value.error_type == "ValidationException"


async def test_structured_output_and_a_model_that_refuses_it() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    config = InferenceConfig(response_format=ResponseFormat(name="City", schema=schema))
    script = Script([reply_text('{"city": "Paris"}')])
    async with running(script, structured_output_models={MODEL}) as (server, provider):
        response = await provider.chat_completion(ChatRequest.of("City?", config=config))
        assert json.loads(response.text) == {"city": "Paris"}
        assert server.script.requests[0].config.response_format == config.response_format
        refused = InferenceConfig(
            model="meta.llama3-70b-instruct-v1:0", response_format=config.response_format
        )
        with pytest.raises(InvalidRequest, match="outputConfig"):
            await provider.chat_completion(ChatRequest.of("City?", config=refused))


async def test_count_tokens_exact_then_heuristic_for_unsupported_models() -> None:
    async with running(
        Script([]), count_tokens=lambda messages, tools: 1234, count_tokens_models={MODEL}
    ) as (server, provider):
        assert await provider.count_tokens(ChatRequest.of("hello")) == 1234
        other = ChatRequest.of("hello", config=InferenceConfig(model="amazon.nova-pro-v1:0"))
        estimate = await provider.count_tokens(other)
        assert estimate != 1234
        # The unsupported model is not asked again; the supported one still is.
        assert await provider.count_tokens(other) == estimate
        assert await provider.count_tokens(ChatRequest.of("hello")) == 1234
        assert [r.path.rsplit("/", 1)[-1] for r in server.requests] == ["count-tokens"] * 3


async def test_count_tokens_raises_a_validation_error_that_is_not_about_support() -> None:
    def too_long(messages: list[Message], tools: list[ToolDefinition]) -> int:
        raise ValueError("Input is too long for requested model.")

    async with running(Script([]), count_tokens=too_long) as (server, provider):
        for _ in range(2):  # raised every time: nothing was learned about the model
            with pytest.raises(InvalidRequest, match="too long") as caught:
                await provider.count_tokens(ChatRequest.of("hello"))
            assert caught.value.error_type == "ValidationException"
        assert len(server.requests) == 2


async def test_list_models_includes_inference_profiles() -> None:
    async with running(Script([])) as (server, provider):
        models = await provider.list_models()
    assert [m.id for m in models] == [m.id for m in (*server.models, *server.profiles)]
    assert models[-1].object == "inference_profile"
    assert models[0].owned_by == "Anthropic"


async def test_bedrock_api_key_is_a_bearer_token_without_signing() -> None:
    async with running(
        Script([reply_text("ok")]), config={"api_key": "bedrock-api-key"}, api_key="bedrock-api-key"
    ) as (server, provider):
        assert (await provider.chat_completion(ChatRequest.of("hi"))).text == "ok"
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer bedrock-api-key"
    assert "x-amz-date" not in headers
    assert provider.credentials_source == "api_key"


async def test_api_key_from_the_environment(
    no_aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "env-key")
    async with running(Script([reply_text("ok")]), config={}, api_key="env-key") as (server, _):
        pass
    async with open_bedrock_server(Script([reply_text("ok")]), api_key="env-key") as server:
        provider = BedrockProvider(
            BedrockConfig(region="us-east-1", model_id=MODEL, endpoint_url=server.base_url)
        )
        async with provider.open():
            assert (await provider.chat_completion(ChatRequest.of("hi"))).text == "ok"


async def test_wrong_secret_is_rejected_by_the_signature_check() -> None:
    config = {"access_key_id": "AKIAFAKEKOVATESTING1", "secret_access_key": "wrong"}
    async with running(Script([]), config=config) as (_, provider):
        with pytest.raises(ProviderAuthError, match="signature"):
            await provider.chat_completion(ChatRequest.of("hi"))


async def test_session_token_is_checked() -> None:
    key = "ASIATEMPORARYKEY0001"
    async with running(
        Script([reply_text("ok")]),
        config={"access_key_id": key, "secret_access_key": "s", "session_token": "tok"},
        access_keys={key: "s"},
        session_tokens={key: "tok"},
    ) as (server, provider):
        await provider.chat_completion(ChatRequest.of("hi"))
    assert server.requests[0].headers["x-amz-security-token"] == "tok"


async def test_empty_credential_chain_fails_before_any_request(no_aws_env: Path) -> None:
    async with open_bedrock_server(Script([reply_text("never")])) as server:
        provider = BedrockProvider(
            BedrockConfig(region="us-east-1", model_id=MODEL, endpoint_url=server.base_url)
        )
        async with provider.open():
            with pytest.raises(ProviderAuthError, match="no AWS credentials"):
                await provider.chat_completion(ChatRequest.of("hi"))
            with pytest.raises(ProviderAuthError):
                provider.chat_completion_stream(ChatRequest.of("hi"))
            with pytest.raises(ProviderAuthError):
                await provider.list_models()
            with pytest.raises(ProviderAuthError):
                await provider.count_tokens(ChatRequest.of("hi"))
        assert server.requests == []


async def test_named_profile_resolves_in_a_worker_thread(no_aws_env: Path) -> None:
    (no_aws_env / "credentials").write_text(
        "[kova-test]\naws_access_key_id = AKIAFAKEKOVATESTING1\n"
        "aws_secret_access_key = fake/secret+key/for/kova/testing/only00000\n"
    )
    async with running(Script([reply_text("ok")]), config={"profile": "kova-test"}) as (
        _,
        provider,
    ):
        assert (await provider.chat_completion(ChatRequest.of("hi"))).text == "ok"
    assert provider.credentials_source == "shared-credentials-file"


async def test_unknown_profile_is_an_auth_error(no_aws_env: Path) -> None:
    async with running(Script([]), config={"profile": "nope"}) as (server, provider):
        with pytest.raises(ProviderAuthError, match="could not be resolved"):
            await provider.chat_completion(ChatRequest.of("hi"))
    assert server.requests == []


async def test_credential_process_runs_once(no_aws_env: Path) -> None:
    import sys

    script = no_aws_env / "creds.py"
    counter = no_aws_env / "runs"
    script.write_text(
        "import json, pathlib\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x')\n"
        "print(json.dumps({'Version': 1, 'AccessKeyId': 'AKIAFAKEKOVATESTING1',"
        " 'SecretAccessKey': 'fake/secret+key/for/kova/testing/only00000'}))\n"
    )
    (no_aws_env / "config").write_text(
        f"[profile proc]\ncredential_process = {sys.executable} {script}\n"
    )
    async with running(Script([reply_text("a"), reply_text("b")]), config={"profile": "proc"}) as (
        _,
        provider,
    ):
        async with provider.open():  # nested open: no second resolution
            await provider.chat_completion(ChatRequest.of("hi"))
        await provider.chat_completion(ChatRequest.of("hi"))
    assert provider.credentials_source == "custom-process"
    assert counter.read_text() == "x"


async def test_no_thread_is_started_while_a_stream_is_read() -> None:
    reply = reply_tool_calls(("get_weather", {"city": "Paris"}), text="Let me check the weather.")
    async with running(Script([reply, reply])) as (_, provider):
        await collect(provider, ChatRequest.of("warm-up"))  # the pool and first imports
        before = set(threading.enumerate())
        async with provider.chat_completion_stream(ChatRequest.of("hi", tools=[WEATHER])) as stream:
            async for _ in stream:
                assert set(threading.enumerate()) == before
        assert set(threading.enumerate()) == before


async def test_cancelling_a_stream_closes_it() -> None:
    reply = StreamReply(response=reply_text("Hello " * 50), chunk_chars=1)
    async with running(Script([reply, reply_text("next")])) as (_, provider):
        with trio.move_on_after(5) as scope:
            async with provider.chat_completion_stream(ChatRequest.of("hi")) as stream:
                async for _ in stream:
                    scope.cancel()
        assert scope.cancelled_caught
        assert (await provider.chat_completion(ChatRequest.of("again"))).text == "next"


async def test_cancelled_resolution_abandons_the_thread_and_retries(
    no_aws_env: Path, autojump_clock: trio.testing.MockClock
) -> None:
    import sys

    release = no_aws_env / "release"
    script = no_aws_env / "slow_creds.py"
    script.write_text(
        "import json, pathlib, time\n"
        f"while not pathlib.Path({str(release)!r}).exists():\n"
        "    time.sleep(0.01)\n"
        "print(json.dumps({'Version': 1, 'AccessKeyId': 'AKIAFAKEKOVATESTING1',"
        " 'SecretAccessKey': 'fake/secret+key/for/kova/testing/only00000'}))\n"
    )
    (no_aws_env / "config").write_text(
        f"[profile slow]\ncredential_process = {sys.executable} {script}\n"
    )
    provider = BedrockProvider(BedrockConfig(region="us-east-1", model_id=MODEL, profile="slow"))
    with trio.move_on_after(5) as scope:
        async with provider.open():
            pytest.fail("open() should still be resolving")
    # The blocked credential process held the worker thread; the deadline abandoned it.
    assert scope.cancelled_caught
    assert trio.current_time() == 5
    assert provider.credentials_source is None
    with pytest.raises(ProviderAuthError, match="not resolved"):
        await provider.chat_completion(ChatRequest.of("hi"))
    release.write_text("go")
    async with provider.open():  # resolves again, now that the source answers
        assert provider.credentials_source == "custom-process"


async def test_cache_points_reach_the_service_and_cache_usage_comes_back() -> None:
    usage = Usage(input_tokens=1000, output_tokens=5, cache_read_tokens=900)
    reply = ModelResponse(content=(Text(text="ok"),), stop_reason=StopReason.END_TURN, usage=usage)
    request = ChatRequest.of([Message.system("Long stable prompt."), Message.user("Hi")])
    async with open_bedrock_server(Script([reply])) as server:
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=MODEL,
                endpoint_url=server.base_url,
                cache_prompt=True,
                **server.credentials,
            )
        )
        async with provider.open():
            response = await provider.chat_completion(request)
    body: Any = server.requests[0].json()
    assert body["system"][-1] == {"cachePoint": {"type": "default"}}
    assert body["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
    assert response.usage == usage
