"""The one HTTP provider: bounded requests on trio's clock, the content-type check, and keys
that never print. Driven by the OpenAI codec through httpx2.MockTransport (the wire shapes
are covered by each provider's tests against its fake server)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio
import trio.testing

from kova import InvalidResponse, KovaTimeoutError, ProviderAuthError, RateLimited
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

KEY = "sk-very-secret-key-12345"
REQUEST = ChatRequest.of("hi")


def provider(
    handler: Callable[[httpx2.Request], httpx2.Response], **options: object
) -> OpenAiCompatibleProvider:
    config = OpenAiConfig(model="m", api_key=KEY, base_url="https://x.test", **options)  # type: ignore[arg-type]
    return OpenAiCompatibleProvider(config, transport=httpx2.MockTransport(handler))


async def trickle(
    pieces: list[bytes], delay: float, forever: bytes | None = None
) -> AsyncIterator[bytes]:
    for piece in pieces:
        await trio.sleep(delay)
        yield piece
    while forever is not None:
        await trio.sleep(delay)
        yield forever


def sse_response(body: AsyncIterator[bytes]) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)


async def test_an_endless_stream_of_pings_hits_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return sse_response(trickle([], 0.5, forever=b": ping\n\n"))

    chat = provider(handler, timeout=2.0)
    async with chat.open():
        async with chat.chat_completion_stream(REQUEST) as batches:
            with pytest.raises(KovaTimeoutError, match="idle timeout"):
                async for _batch in batches:
                    pass
            # (Leaving then closes the response; this fake's body never ends by itself.)
            assert trio.current_time() == pytest.approx(2.0)


async def test_events_keep_a_stream_alive_until_the_total_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    event = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'

    def handler(request: httpx2.Request) -> httpx2.Response:
        return sse_response(trickle([], 1.0, forever=event))

    chat = provider(handler, timeout=2.0, stream_timeout=10.0)
    received = 0
    async with chat.open(), chat.chat_completion_stream(REQUEST) as batches:
        with pytest.raises(KovaTimeoutError, match="total deadline"):
            async for batch in batches:
                received += len(batch)
        assert trio.current_time() == pytest.approx(10.0)
    assert received >= 8


async def test_a_trickled_non_streaming_body_hits_the_total_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = trickle([b'{"choices":'], 0.5, forever=b" ")
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=body)

    chat = provider(handler, timeout=2.0, total_timeout=30.0)
    async with chat.open():
        with pytest.raises(KovaTimeoutError, match="total_timeout"):
            await chat.chat_completion(REQUEST)
    assert trio.current_time() == pytest.approx(30.0)


async def test_an_endless_non_streaming_body_hits_the_size_cap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = trickle([], 0.001, forever=b"x" * 65536)
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=body)

    chat = provider(handler, max_response_bytes=1_000_000)
    async with chat.open():
        with pytest.raises(InvalidResponse, match="max_response_bytes"):
            await chat.chat_completion(REQUEST)


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("text/html", b"<html>captive portal</html>", "got text/html"),
        ("application/json", b'{"id": "x", "choices": []}', "got a JSON body"),
        ("", b"???", "no content type"),
    ],
)
async def test_a_stream_that_is_not_a_stream_is_named(
    content_type: str, body: bytes, message: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": content_type} if content_type else {}
        return httpx2.Response(200, headers=headers, content=body)

    chat = provider(handler)
    async with chat.open():
        with pytest.raises(InvalidResponse, match=message):
            async with chat.chat_completion_stream(REQUEST):
                pytest.fail("entered a stream that is not one")


async def test_a_json_error_body_with_status_200_is_classified() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        error = {
            "error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}
        }
        return httpx2.Response(200, json=error)

    chat = provider(handler)
    async with chat.open():
        # Classified by its type, as an error event inside a stream would be.
        with pytest.raises(RateLimited, match="slow down"):
            async with chat.chat_completion_stream(REQUEST):
                pass


def _rendered(*values: object) -> str:
    """Everything a user might print: repr, str, and a traceback with locals."""
    return "\n".join(f"{value!r}\n{value}" for value in values)


async def test_keys_never_print_openai() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        # A server that echoes the key it was sent in its error message.
        return httpx2.Response(
            401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}
        )

    chat = provider(handler)
    async with chat.open():
        with pytest.raises(ProviderAuthError) as caught:
            await chat.chat_completion(REQUEST)
    text = _rendered(chat, chat.config, chat.codec, chat.transport, caught.value)
    assert KEY not in text
    assert "**********" in str(caught.value)


async def test_keys_never_print_anthropic_and_azure() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("x-api-key") or request.headers.get("api-key") or "")
        return httpx2.Response(429, json={"error": {"type": "rate_limit_error", "message": KEY}})

    anthropic = AnthropicProvider(
        AnthropicConfig(model="m", api_key=KEY, api_version="2023-06-01"),
        transport=httpx2.MockTransport(handler),
    )
    azure = OpenAiCompatibleProvider(
        OpenAiConfig(model="m", api_key=KEY, base_url="https://az.test", api_version="2024-10-21"),
        transport=httpx2.MockTransport(handler),
    )
    for chat in (anthropic, azure):
        async with chat.open():
            with pytest.raises(RateLimited) as caught:
                await chat.chat_completion(REQUEST)
        assert KEY not in _rendered(chat, chat.config, chat.transport, caught.value)
    assert seen == [KEY, KEY]  # the key did go on the wire, in the right header


def test_a_traceback_with_locals_shows_no_key() -> None:
    import traceback

    config = OpenAiConfig(model="m", api_key=KEY)
    chat = OpenAiCompatibleProvider(config)
    try:
        raise RuntimeError(json.dumps({"x": 1}))
    except RuntimeError as exc:
        rendered = "".join(
            traceback.TracebackException.from_exception(exc, capture_locals=True).format()
        )
    assert chat is not None
    assert KEY not in rendered


async def test_a_transport_failure_rendered_with_locals_shows_no_key() -> None:
    import traceback

    from kova import KovaConnectionError

    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there: the connection is refused
    for chat in (
        OpenAiCompatibleProvider(
            OpenAiConfig(model="m", api_key=KEY, base_url=f"http://127.0.0.1:{port}")
        ),
        AnthropicProvider(
            AnthropicConfig(
                model="m",
                api_key=KEY,
                base_url=f"http://127.0.0.1:{port}",
                api_version="2023-06-01",
            )
        ),
    ):
        async with chat.open():
            with pytest.raises(KovaConnectionError) as caught:
                await chat.chat_completion(REQUEST)
        rendered = "".join(
            traceback.TracebackException.from_exception(caught.value, capture_locals=True).format()
        )
        assert KEY not in rendered


def test_a_vendor_provider_shows_its_config_and_a_bare_one_its_codec() -> None:
    from kova.providers import HttpProvider
    from kova.providers.bedrock import BedrockConfig, BedrockProvider
    from kova.providers.gemini import GeminiConfig, GeminiProvider
    from kova.providers.ollama import OllamaConfig, OllamaProvider
    from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider

    providers = [
        AnthropicProvider(AnthropicConfig(model="m", api_key="sk-hidden-1")),
        OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="sk-hidden-1")),
        OpenAiResponsesProvider(OpenAiResponsesConfig(model="m", api_key="sk-hidden-1")),
        GeminiProvider(GeminiConfig(model="m", api_key="sk-hidden-1")),
        OllamaProvider(OllamaConfig(model="m")),
        BedrockProvider(BedrockConfig(region="us-east-1", model_id="m", api_key="sk-hidden-1")),
    ]
    for provider in providers:
        assert repr(provider) == f"{type(provider).__name__}({provider.config!r})"
        assert "sk-hidden-1" not in repr(provider)
    bare = HttpProvider(providers[0].codec, base_url="http://127.0.0.1:1")
    assert repr(bare) == f"HttpProvider(codec={bare.codec!r}, base_url='http://127.0.0.1:1')"
