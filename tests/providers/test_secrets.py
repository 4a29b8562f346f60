"""No credential prints, however it arrived: every provider, every credential kind (API keys,
bearer tokens, Azure ``api-key``, Gemini ``x-goog-api-key``, Bedrock API keys, AWS access keys
and session tokens, ``extra_headers``), every way a server can echo one (the error message,
type or code, an error event inside a stream, a 200 JSON error body) and every failure before
an answer (refused connection, timeout). "Prints" means ``str``, ``repr``, a traceback rendered
with its frames' local variables (the standard library's and pytest's), the request on the
error's cause, and the repr of configs, providers and ``AgentConfig``.

The providers run against kova's fake servers on loopback (the real wire formats)."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import attrs
import httpx2
import pytest
import trio
from _pytest._code import ExceptionInfo
from structlog.testing import capture_logs

from kova import (
    InvalidResponse,
    KovaConnectionError,
    KovaError,
    KovaTimeoutError,
    Message,
    ProviderError,
    SecretHeaders,
)
from kova._secret import Secret
from kova.agent import Agent, AgentBuilder, AgentConfig, RetryConfig
from kova.providers import ChatRequest, ErrorEvent
from kova.providers._auth import bearer_auth
from kova.providers._http_provider import HttpProvider
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import (
    GeminiConfig,
    GeminiEmbeddingConfig,
    GeminiEmbeddingProvider,
    GeminiProvider,
)
from kova.providers.ollama import (
    OllamaConfig,
    OllamaEmbeddingConfig,
    OllamaEmbeddingProvider,
    OllamaProvider,
)
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiEmbeddingConfig,
    OpenAiEmbeddingProvider,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import (
    ErrorReply,
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
from kova.tools import ToolRegistry

if TYPE_CHECKING:
    from kova.providers import Provider

BEDROCK_MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
ACCESS_KEY = "AKIAKOVASECRETTEST01"
SECRET_ACCESS_KEY = "kova/secret+access/key/never/printed00001"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEKOVASESSIONTOKEN0001"
GATEWAY_KEY = "gw-kova-gateway-key-never-printed-0001"
HEADERS = {"x-gateway-key": GATEWAY_KEY}

Opener = Callable[[Script], AbstractAsyncContextManager[Any]]


@attrs.frozen
class Credential:
    """One credential kind on one provider: the fake server, the provider for its URL, the
    values that must never print, and the one the server echoes back."""

    name: str
    open_server: Opener
    build: Callable[[str], Provider]
    secrets: tuple[str, ...]
    typed_errors: bool = True
    """The provider's errors carry a type a server can echo (Ollama's carry only text)."""

    @property
    def echoed(self) -> str:
        """Every secret value, as one text a server echoes."""
        return " ".join(self.secrets)


def _key(name: str) -> str:
    return f"kova-{name}-api-key-never-printed-0001"


def _bedrock(**config: Any) -> Callable[[str], Provider]:
    def build(url: str) -> Provider:
        return BedrockProvider(
            BedrockConfig(region="us-east-1", model_id=BEDROCK_MODEL, endpoint_url=url, **config)
        )

    return build


CREDENTIALS = [
    Credential(
        "openai-bearer",
        open_openai_server,
        lambda url: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=url, api_key=_key("openai"))
        ),
        (_key("openai"),),
    ),
    Credential(
        "azure-api-key",
        open_openai_server,
        lambda url: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=url, api_key=_key("azure"), api_version="2024-10-21")
        ),
        (_key("azure"),),
    ),
    Credential(
        "openai-responses-bearer",
        open_responses_server,
        lambda url: OpenAiResponsesProvider(
            OpenAiResponsesConfig(
                model="m", base_url=url, api_key=_key("responses"), extra_headers=HEADERS
            )
        ),
        (_key("responses"), GATEWAY_KEY),
    ),
    Credential(
        "openai-responses-azure",
        open_responses_server,
        lambda url: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url=url, api_key=_key("azure-v1"), azure=True)
        ),
        (_key("azure-v1"),),
    ),
    Credential(
        "anthropic-x-api-key",
        open_anthropic_server,
        lambda url: AnthropicProvider(
            AnthropicConfig(
                model="m", base_url=url, api_key=_key("anthropic"), api_version="2023-06-01"
            )
        ),
        (_key("anthropic"),),
    ),
    Credential(
        "anthropic-bearer",
        open_anthropic_server,
        lambda url: AnthropicProvider(
            AnthropicConfig(model="m", base_url=url, api_key=_key("anthropic-bearer"))
        ),
        (_key("anthropic-bearer"),),
    ),
    Credential(
        "gemini-api-key",
        open_gemini_server,
        lambda url: GeminiProvider(GeminiConfig(model="m", base_url=url, api_key=_key("gemini"))),
        (_key("gemini"),),
    ),
    Credential(
        "ollama-bearer",
        open_ollama_server,
        lambda url: OllamaProvider(OllamaConfig(model="m", base_url=url, api_key=_key("ollama"))),
        (_key("ollama"),),
        typed_errors=False,
    ),
    Credential(
        "bedrock-api-key",
        functools.partial(open_bedrock_server, api_key=_key("bedrock")),
        _bedrock(api_key=_key("bedrock")),
        (_key("bedrock"),),
    ),
    Credential(
        "aws-access-keys",
        functools.partial(open_bedrock_server, access_keys={ACCESS_KEY: SECRET_ACCESS_KEY}),
        _bedrock(access_key_id=ACCESS_KEY, secret_access_key=SECRET_ACCESS_KEY),
        (ACCESS_KEY, SECRET_ACCESS_KEY),
    ),
    Credential(
        "aws-session-token",
        functools.partial(
            open_bedrock_server,
            access_keys={ACCESS_KEY: SECRET_ACCESS_KEY},
            session_tokens={ACCESS_KEY: SESSION_TOKEN},
        ),
        _bedrock(
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_ACCESS_KEY,
            session_token=SESSION_TOKEN,
        ),
        (ACCESS_KEY, SECRET_ACCESS_KEY, SESSION_TOKEN),
    ),
    # A gateway key in extra_headers, on each of the five providers.
    Credential(
        "openai-extra-headers",
        open_openai_server,
        lambda url: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=url, api_key="", extra_headers=HEADERS)
        ),
        (GATEWAY_KEY,),
    ),
    Credential(
        "anthropic-extra-headers",
        open_anthropic_server,
        lambda url: AnthropicProvider(
            AnthropicConfig(model="m", base_url=url, api_key="k", extra_headers=HEADERS)
        ),
        (GATEWAY_KEY,),
    ),
    Credential(
        "gemini-extra-headers",
        open_gemini_server,
        lambda url: GeminiProvider(
            GeminiConfig(model="m", base_url=url, api_key="k", extra_headers=HEADERS)
        ),
        (GATEWAY_KEY,),
    ),
    Credential(
        "ollama-extra-headers",
        open_ollama_server,
        lambda url: OllamaProvider(OllamaConfig(model="m", base_url=url, extra_headers=HEADERS)),
        (GATEWAY_KEY,),
        typed_errors=False,
    ),
    Credential(
        "bedrock-extra-headers",
        functools.partial(open_bedrock_server, access_keys={ACCESS_KEY: SECRET_ACCESS_KEY}),
        _bedrock(
            access_key_id=ACCESS_KEY, secret_access_key=SECRET_ACCESS_KEY, extra_headers=HEADERS
        ),
        (ACCESS_KEY, SECRET_ACCESS_KEY, GATEWAY_KEY),
    ),
]
IDS = [credential.name for credential in CREDENTIALS]


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def rendered(exc: BaseException, *, pytest_style: bool = False) -> str:
    """Every way an error reaches a person: ``str``, ``repr``, the attributes a handler logs,
    a traceback with locals as the standard library renders it (and pytest's ``-l``, which
    costs a third of a second: asked for where it adds a path), and the request on every
    error of the chain (httpx2 masks only ``Authorization`` there)."""
    parts = [str(exc), repr(exc)]
    for error in _chain(exc):
        parts += [str(error), repr(error), repr(getattr(error, "error_type", None))]
        try:
            request = error.request  # type: ignore[attr-defined]
        except (AttributeError, RuntimeError):
            continue
        parts += [repr(request), repr(request.headers), repr(list(request.headers.items()))]
    parts.append(
        "".join(traceback.TracebackException.from_exception(exc, capture_locals=True).format())
    )
    if pytest_style:
        info = ExceptionInfo.from_exception(exc)
        parts.append(str(info.getrepr(showlocals=True, style="long", chain=True)))
    return "\n".join(parts)


def assert_hidden(text: str, credential: Credential) -> None:
    # In any letter case: a decoder may capitalize an error type (Bedrock's exceptions).
    folded = text.casefold()
    for secret in credential.secrets:
        assert secret.casefold() not in folded, f"{credential.name}: a credential printed"


async def _attempt(provider: Provider, *, stream: bool) -> KovaError:
    """The error of one call, caught right here: its traceback holds kova's frames and this
    one (locals: the provider), not the test's own, which hold the secrets it checks for."""
    try:
        if stream:
            async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
                async for _batch in batches:
                    pass
        else:
            await provider.chat_completion(ChatRequest.of("hi"))
    except KovaError as exc:
        return exc
    raise AssertionError("the call did not fail")


async def _failure(credential: Credential, reply: Any, *, stream: bool) -> KovaError:
    async with credential.open_server(Script([reply])) as server:
        provider = credential.build(server.base_url)
        async with provider.open():
            return await _attempt(provider, stream=stream)


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("where", ["message", "type"])
async def test_a_credential_the_server_echoes_in_an_error_never_prints(
    credential: Credential, stream: bool, where: str
) -> None:
    secret = credential.echoed
    if where == "message":
        reply = ErrorReply(status_code=401, message=f"Incorrect API key provided: {secret}")
    elif credential.typed_errors:
        reply = ErrorReply(status_code=400, message="bad request", error_type=secret)
    else:
        pytest.skip("this provider's errors have no type")
    error = await _failure(credential, reply, stream=stream)
    assert isinstance(error, ProviderError)
    assert_hidden(rendered(error, pytest_style=where == "message"), credential)
    assert "**********" in str(error)


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
@pytest.mark.parametrize("where", ["message", "type"])
async def test_a_credential_echoed_in_an_error_event_inside_a_stream_never_prints(
    credential: Credential, where: str
) -> None:
    if where == "type" and not credential.typed_errors:
        pytest.skip("this provider's error events have no type")
    secret = credential.echoed
    event = (
        ErrorEvent(message=f"key {secret} revoked", error_type="")
        if where == "message"
        else ErrorEvent(message="failed", error_type=secret)
    )
    reply = StreamReply(response=reply_text("x"), events=(event,))
    error = await _failure(credential, reply, stream=True)
    assert isinstance(error, KovaError)
    assert_hidden(rendered(error), credential)
    assert "**********" in str(error)


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
async def test_a_credential_echoed_to_an_agent_never_reaches_its_events_or_traceback(
    credential: Credential,
) -> None:
    secret = credential.echoed
    reply = ErrorReply(status_code=403, message=f"key {secret} is not allowed")
    async with credential.open_server(Script([reply])) as server:
        provider = credential.build(server.base_url)
        builder = AgentBuilder().provider(provider).retry_config(RetryConfig(max_retries=0))
        async with builder.build() as agent:
            events: list[object] = []
            telemetry: list[object] = []
            with capture_logs() as logs, agent.telemetry.subscribe(telemetry.append):
                error = await _run(agent, events)
            shown = "\n".join(
                [
                    rendered(error, pytest_style=True),
                    repr(events),
                    repr(telemetry),
                    repr(logs),
                    repr(agent.config),
                ]
            )
    assert isinstance(error, ProviderError)
    assert telemetry  # the failed call was reported
    assert_hidden(shown, credential)


async def _run(agent: Agent, events: list[object]) -> KovaError:
    try:
        async with agent.stream([Message.user("hi")]) as stream:
            async for event in stream:
                events.append(event)
    except KovaError as exc:
        return exc
    raise AssertionError("the turn did not fail")


async def _refused_url() -> str:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there: the connection is refused
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_refused_connection_never_prints_a_credential(
    credential: Credential, stream: bool
) -> None:
    provider = credential.build(await _refused_url())
    async with provider.open():
        error = await _attempt(provider, stream=stream)
    assert isinstance(error, KovaConnectionError)
    cause = error.__cause__
    assert isinstance(cause, httpx2.ConnectError)
    assert_hidden(rendered(error), credential)
    # The request still says what was sent: the headers by name, protocol values as sent.
    headers = cause.request.headers
    assert headers["content-type"] == "application/json"
    assert "**********" in headers.values()


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
async def test_a_timeout_never_prints_a_credential(
    credential: Credential, autojump_clock: object
) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, silent, 0)
        port = listeners[0].socket.getsockname()[1]
        provider = credential.build(f"http://127.0.0.1:{port}")
        async with provider.open():
            error = await _attempt(provider, stream=False)
        nursery.cancel_scope.cancel()
    assert isinstance(error, KovaTimeoutError)
    assert isinstance(error.__cause__, httpx2.ReadTimeout)
    assert_hidden(rendered(error), credential)


@pytest.mark.parametrize("credential", CREDENTIALS, ids=IDS)
async def test_configs_providers_and_agent_configs_never_print_a_credential(
    credential: Credential,
) -> None:
    provider = credential.build("http://127.0.0.1:1")
    config = getattr(provider, "config", None)
    agent_config = AgentConfig(provider=provider, registry=ToolRegistry())
    shown = "\n".join(
        f"{value!r}\n{value}"
        for value in (provider, config, agent_config, provider.transport)  # type: ignore[attr-defined]
    )
    assert_hidden(shown, credential)


# --- the error code, and a 200 JSON error body -------------------------------------------------


def _mock_provider(
    credential_name: str, handler: Callable[[httpx2.Request], httpx2.Response]
) -> Any:
    transport = httpx2.MockTransport(handler)
    key = _key(credential_name)
    builders: dict[str, Callable[[], Any]] = {
        "openai": lambda: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url="https://x.test", api_key=key), transport=transport
        ),
        "anthropic": lambda: AnthropicProvider(
            AnthropicConfig(model="m", base_url="https://x.test", api_key=key),
            transport=transport,
        ),
        "gemini": lambda: GeminiProvider(
            GeminiConfig(model="m", base_url="https://x.test", api_key=key), transport=transport
        ),
        "ollama": lambda: OllamaProvider(
            OllamaConfig(model="m", base_url="https://x.test", api_key=key), transport=transport
        ),
        "openai-responses": lambda: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url="https://x.test", api_key=key),
            transport=transport,
        ),
        "openai-responses-headers": lambda: OpenAiResponsesProvider(
            OpenAiResponsesConfig(
                model="m", base_url="https://x.test", api_key=key, extra_headers={"x-gw": key}
            ),
            transport=transport,
        ),
        "bedrock": lambda: BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id=BEDROCK_MODEL,
                endpoint_url="https://x.test",
                api_key=key,
            ),
            transport=transport,
        ),
    }
    return builders[credential_name]()


PROVIDERS = [
    "openai",
    "openai-responses",
    "openai-responses-headers",
    "anthropic",
    "gemini",
    "ollama",
    "bedrock",
]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("status", [400, 200])
async def test_a_key_echoed_as_the_error_code_or_type_never_prints(name: str, status: int) -> None:
    key = _key(name)

    def handler(request: httpx2.Request) -> httpx2.Response:
        # Every slot an error body's type or code can come from, holding the key.
        body = {
            "error": {"message": "refused", "code": key, "type": key, "status": key},
            "message": "refused",
            "__type": key,
            "type": key,
        }
        return httpx2.Response(status, json=body, headers={"x-amzn-errortype": key})

    provider = _mock_provider(name, handler)
    assert key not in repr(provider)
    async with provider.open():
        errors = [await _attempt(provider, stream=stream) for stream in (False, True)]
    for error in errors:
        assert key.casefold() not in rendered(error).casefold()


# --- SecretHeaders --------------------------------------------------------------------------


def test_extra_headers_are_masked_unless_listed_as_public() -> None:
    headers = SecretHeaders(
        {"x-portkey-api-key": GATEWAY_KEY, "anthropic-beta": "context-1m-2025-08-07"},
        public=("Anthropic-Beta",),
    )
    config = AnthropicConfig(model="m", api_key="k", extra_headers=headers)
    shown = repr(config) + repr(AnthropicProvider(config)) + repr(headers) + str(headers)
    assert GATEWAY_KEY not in shown
    assert "context-1m-2025-08-07" in shown  # listed as not secret
    assert "x-portkey-api-key" in shown  # names show, values do not
    # The values still go on the wire, and read as a plain mapping.
    assert dict(config.extra_headers) == {
        "x-portkey-api-key": GATEWAY_KEY,
        "anthropic-beta": "context-1m-2025-08-07",
    }
    assert config.extra_headers == {
        "x-portkey-api-key": GATEWAY_KEY,
        "anthropic-beta": "context-1m-2025-08-07",
    }


def test_a_plain_mapping_of_extra_headers_is_masked_in_every_config() -> None:
    configs: list[object] = [
        OpenAiConfig(model="m", extra_headers=HEADERS),
        AnthropicConfig(model="m", extra_headers=HEADERS),
        GeminiConfig(model="m", api_key="k", extra_headers=HEADERS),
        OllamaConfig(model="m", extra_headers=HEADERS),
        BedrockConfig(region="us-east-1", model_id=BEDROCK_MODEL, extra_headers=HEADERS),
    ]
    for config in configs:
        extra = config.extra_headers  # type: ignore[attr-defined]
        assert isinstance(extra, SecretHeaders)
        assert GATEWAY_KEY not in repr(config)
        assert extra["x-gateway-key"] == GATEWAY_KEY


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": 1}, "str to str"),
        ({1: "x"}, "str to str"),
        ("x: y", "a mapping"),
    ],
)
def test_secret_headers_refuse_what_is_not_a_header(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        SecretHeaders(value)


def test_public_header_names_are_a_collection_of_names() -> None:
    with pytest.raises(TypeError, match="public"):
        SecretHeaders({"x": "y"}, public="x")  # a str is not a list of names
    with pytest.raises(TypeError, match="public"):
        SecretHeaders({"x": "y"}, public=(1,))  # type: ignore[arg-type]


def test_every_provider_config_keeps_extra_headers_masked() -> None:
    """Any config class with ``extra_headers`` (those to come too) converts them into
    ``SecretHeaders``, so a new provider's repr masks them without a test of its own."""
    import importlib
    import pkgutil

    import kova.providers

    found: list[str] = []
    for module_info in pkgutil.walk_packages(kova.providers.__path__, "kova.providers."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                fields = attrs.fields_dict(value)
                if "extra_headers" in fields:
                    converter: Any = fields["extra_headers"].converter
                    converted = converter({"x-gateway-key": GATEWAY_KEY})
                    assert isinstance(converted, SecretHeaders), value
                    assert GATEWAY_KEY not in repr(converted)
                    found.append(value.__name__)
    assert len(found) >= 8, found  # five chat configs, three embedding configs


@pytest.mark.parametrize("azure", [False, True], ids=["bearer", "azure-api-key"])
async def test_the_responses_provider_never_prints_a_credential(azure: bool) -> None:
    key = _key("responses")
    url = await _refused_url()
    config = OpenAiResponsesConfig(
        model="m", base_url=url, api_key=key, extra_headers={"x-gateway-key": GATEWAY_KEY}
    )
    if azure:
        config = attrs.evolve(config, azure=True)
    provider = OpenAiResponsesProvider(config)
    async with provider.open():
        errors = [await _attempt(provider, stream=stream) for stream in (False, True)]
    credential = Credential(
        "responses", open_openai_server, lambda _url: provider, (key, GATEWAY_KEY)
    )
    for error in errors:
        assert isinstance(error, KovaConnectionError)
        assert_hidden(rendered(error) + repr(provider) + repr(config), credential)


# --- embedding providers -------------------------------------------------------------------


@attrs.frozen
class Embedder:
    """One embedding provider and credential kind, over a mock transport: how a 200 body
    holds vectors on its wire, and how it reports an error."""

    name: str
    build: Callable[[str, httpx2.MockTransport], Any]
    vectors: Callable[[str], Any]
    """A 200 answer whose vectors hold ``text`` where a number belongs."""
    error_body: Callable[[str], Any]
    """The provider's JSON error body with ``text`` as its message."""


def _openai_embedder(**config: Any) -> Callable[[str, httpx2.MockTransport], Any]:
    def build(key: str, transport: httpx2.MockTransport) -> Any:
        options = {"api_key": key, **config}
        if config.get("extra_headers") == "key":
            options = {"api_key": "", "extra_headers": {"x-gateway-key": key}}
        return OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url="https://x.test", **options), transport=transport
        )

    return build


def _openai_error(text: str) -> Any:
    return {"error": {"message": text, "type": "invalid_request_error", "code": "invalid_api_key"}}


EMBEDDERS = [
    Embedder(
        "openai-bearer",
        _openai_embedder(),
        lambda text: {"data": [{"embedding": text, "index": 0}]},  # not base64 either
        _openai_error,
    ),
    Embedder(
        "openai-azure-api-key",
        _openai_embedder(api_version="2024-10-21"),
        lambda text: {"data": [{"embedding": [text], "index": 0}], "usage": {"x": text}},
        _openai_error,
    ),
    Embedder(
        "openai-extra-headers",
        _openai_embedder(extra_headers="key"),
        lambda text: {"data": [{"embedding": [0.5], "index": text}]},
        _openai_error,
    ),
    Embedder(
        "gemini-api-key",
        lambda key, transport: GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(base_url="https://x.test", api_key=key), transport=transport
        ),
        lambda text: {"embeddings": [{"values": [text]}]},
        lambda text: {"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}},
    ),
    Embedder(
        "gemini-extra-headers",
        lambda key, transport: GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(
                base_url="https://x.test", api_key="k", extra_headers={"x-gateway-key": key}
            ),
            transport=transport,
        ),
        lambda text: {"embeddings": [{"values": [text]}]},
        lambda text: {"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}},
    ),
    Embedder(
        "ollama-bearer",
        lambda key, transport: OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(model="m", base_url="https://x.test", api_key=key),
            transport=transport,
        ),
        lambda text: {"embeddings": [[text]], "prompt_eval_count": 1},
        lambda text: {"error": text},
    ),
    Embedder(
        "ollama-extra-headers",
        lambda key, transport: OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(
                model="m", base_url="https://x.test", extra_headers={"x-gateway-key": key}
            ),
            transport=transport,
        ),
        lambda text: {"embeddings": [[text]], "prompt_eval_count": 1},
        lambda text: {"error": text},
    ),
]


async def _embed_failure(embedder: Embedder, key: str, status: int, body: Any) -> KovaError:
    def handler(request: httpx2.Request) -> httpx2.Response:
        if isinstance(body, str):
            return httpx2.Response(status, text=body)
        return httpx2.Response(status, json=body)

    provider = embedder.build(key, httpx2.MockTransport(handler))
    assert key not in repr(provider)
    async with provider.open():
        return await _embed_attempt(provider)


async def _embed_attempt(provider: Any) -> KovaError:
    """As :func:`_attempt`: the traceback holds kova's frames and this one, not the test's."""
    try:
        await provider.embed(["hello"])
    except KovaError as exc:
        return exc
    raise AssertionError("the embedding call did not fail")


@pytest.mark.parametrize("embedder", EMBEDDERS, ids=[e.name for e in EMBEDDERS])
@pytest.mark.parametrize(
    "answer", ["vectors", "error-200", "error-401", "not-json"], ids=lambda answer: answer
)
async def test_an_embedding_provider_never_prints_a_credential_the_server_echoes(
    embedder: Embedder, answer: str
) -> None:
    key = _key(embedder.name)
    echoed = f"Incorrect API key provided: {key}"
    status, body = {
        "vectors": (200, embedder.vectors(key)),
        "error-200": (200, embedder.error_body(echoed)),  # a proxy's error, sent as a 200
        "error-401": (401, embedder.error_body(echoed)),
        "not-json": (200, f"<html>{echoed}</html>"),
    }[answer]
    error = await _embed_failure(embedder, key, status, body)
    assert isinstance(error, ProviderError)
    credential = Credential(embedder.name, open_openai_server, lambda _url: None, (key,))  # type: ignore[arg-type,return-value]
    assert_hidden(rendered(error, pytest_style=True), credential)
    if answer == "vectors":
        assert isinstance(error, InvalidResponse)
    else:
        # An error the server reported is that error, its message masked (a 200 one too:
        # not "the response has no embeddings").
        assert not isinstance(error, InvalidResponse) or answer == "not-json"
        assert "Incorrect API key provided: **********" in str(error)


# --- a codec fault (a bug in a codec, met on a server's bytes) --------------------------------


class _FaultyDecoder:
    """A stream decoder with a bug: it fails on the first frame, with the frame's text in its
    error (``fault``) or only in its local variables (``invalid``, a kova error)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.error = None

    def feed(self, frames: Any) -> list[Any]:
        payload = " ".join(frame.data for frame in frames)
        if self.kind == "fault":
            raise KeyError(payload)
        raise InvalidResponse("a frame kova cannot read", provider="openai")

    def finish(self) -> list[Any]:
        return []


class _FaultyCodec:
    """OpenAI's codec with a faulty decoder (streamed) and a faulty ``decode`` (not)."""

    def __init__(self, kind: str) -> None:
        provider = OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="k"))
        self._inner = provider.codec
        self.kind = kind

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def decode(self, body: Any) -> Any:
        if self.kind == "fault":
            raise ValueError(f"cannot read {body!r}")
        raise InvalidResponse("a body kova cannot read", provider="openai")

    def stream_decoder(self) -> _FaultyDecoder:
        return _FaultyDecoder(self.kind)


@pytest.mark.parametrize("kind", ["fault", "invalid"])
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_codec_fault_on_an_echoed_credential_never_prints_it(
    kind: str, stream: bool
) -> None:
    key = _key("codec-fault")

    def handler(request: httpx2.Request) -> httpx2.Response:
        if stream:
            return httpx2.Response(
                200,
                content=f'data: {{"echo": "{key}"}}\n\n'.encode(),
                headers={"content-type": "text/event-stream"},
            )
        return httpx2.Response(200, json={"echo": key})

    provider = HttpProvider(
        _FaultyCodec(kind),  # type: ignore[arg-type]
        base_url="https://x.test",
        auth=bearer_auth(Secret(key)),
        transport=httpx2.MockTransport(handler),
    )
    async with provider.open():
        error = await _attempt(provider, stream=stream)
    assert isinstance(error, InvalidResponse)
    credential = Credential("codec", open_openai_server, lambda _url: provider, (key,))
    assert_hidden(rendered(error, pytest_style=True), credential)
    if kind == "fault":
        # The fault stays the error's cause (where the codec failed), its text masked.
        cause = error.__cause__
        assert type(cause) is (KeyError if stream else ValueError)
        assert "**********" in str(cause)
        assert cause.__traceback__ is not None
