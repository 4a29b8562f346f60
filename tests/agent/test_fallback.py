"""FallbackProvider: providers tried in order, each with its own actor, gate and retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from kova import (
    InvalidRequest,
    KovaConnectionError,
    ModelNotFound,
    ProviderErrorClass,
    ProviderOverloaded,
    RateLimited,
    StreamError,
    TextDelta,
)
from kova._observe import TurnEmitter
from kova.actors import open_runtime
from kova.agent import AgentBuilder, RetryConfig, spawn_provider
from kova.providers import ChatRequest, FallbackProvider, Provider
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.telemetry import ModelCallFallback, ModelCallFinished, TelemetryEvent
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    Reply,
    ScriptedProvider,
    ScriptRequest,
    StreamReply,
    open_anthropic_server,
    open_openai_server,
    reply_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable


class Recorder:
    def __init__(self) -> None:
        self.events: list[TelemetryEvent] = []

    def on_event(self, event: TelemetryEvent) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[TelemetryEvent]:
        return [event for event in self.events if isinstance(event, kind)]


def _answering(name: str, log: list[tuple[str, float]], reply: Callable[[int], Reply]) -> Provider:
    count = 0

    def model(request: ScriptRequest) -> Reply:
        nonlocal count
        count += 1
        log.append((name, trio.current_time()))
        return reply(count)

    return FunctionProvider(model, name=name)


async def test_anthropic_overloaded_falls_back_to_openai_after_its_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two fake servers of different formats: Anthropic answers 529 until its retries are
    spent, then OpenAI answers. The response and the telemetry say who answered."""
    overloaded = ErrorReply(status_code=529, error_type="overloaded_error")
    async with (
        open_anthropic_server([overloaded] * 3) as anthropic_server,
        open_openai_server([reply_text("from openai")]) as openai_server,
    ):
        provider = FallbackProvider(
            AnthropicProvider(
                AnthropicConfig(model="claude-x", api_key="k", base_url=anthropic_server.base_url)
            ),
            OpenAiCompatibleProvider(
                OpenAiConfig(model="gpt-x", api_key="k", base_url=openai_server.base_url)
            ),
        )
        recorder = Recorder()
        retry = RetryConfig(max_retries=2, initial_backoff=1.0)
        async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
            agent.telemetry.subscribe(recorder)
            response = await agent.run("hi")
            assert trio.current_time() == pytest.approx(3.0)  # 1 + 2 s of backoff first
    assert response.text == "from openai"
    assert len(anthropic_server.requests) == 3
    assert len(openai_server.requests) == 1
    (fallback,) = recorder.of(ModelCallFallback)
    assert isinstance(fallback, ModelCallFallback)
    assert (fallback.from_provider, fallback.to_provider) == ("anthropic", "openai")
    assert (fallback.error_type, fallback.error_class) == ("ProviderOverloaded", "overloaded")
    (finished,) = recorder.of(ModelCallFinished)
    assert isinstance(finished, ModelCallFinished)
    assert finished.response_model == "gpt-x"
    assert finished.response_id is not None
    assert finished.response_id.startswith("chatcmpl-")


async def test_providers_are_tried_in_order_and_the_last_failure_is_the_request_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, float]] = []
    provider = FallbackProvider(
        _answering("a", log, lambda n: ErrorReply(status_code=503)),
        _answering("b", log, lambda n: ErrorReply(status_code=404)),  # a model b lacks
        _answering("c", log, lambda n: reply_text("c") if n == 1 else ErrorReply(status_code=503)),
    )
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        assert ref.name == "fallback(a, b, c)"
        off = ref.with_retry(RetryConfig.disabled())
        assert (await off.chat_completion(ChatRequest.of("one"))).text == "c"
        assert [name for name, _ in log] == ["a", "b", "c"]
        with pytest.raises(ProviderOverloaded):
            await off.chat_completion(ChatRequest.of("two"))  # c fails too: its error
        # each provider has its own actor
        assert len({link.actor.name for link in ref._links}) == 3


async def test_an_error_on_does_not_match_never_falls_back() -> None:
    log: list[tuple[str, float]] = []
    provider = FallbackProvider(
        _answering("a", log, lambda n: ErrorReply(status_code=400)),
        _answering("b", log, lambda n: reply_text("b")),
    )
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(InvalidRequest):
            await ref.chat_completion(ChatRequest.of("hi"))
    assert [name for name, _ in log] == ["a"]


async def test_a_provider_whose_gate_is_closed_is_skipped_until_it_reopens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, float]] = []
    provider = FallbackProvider(
        _answering(
            "a",
            log,
            lambda n: ErrorReply(status_code=429, retry_after=30.0) if n == 1 else reply_text("a"),
        ),
        _answering("b", log, lambda n: reply_text("b")),
    )
    fallbacks: list[tuple[str, str, str | None]] = []

    def on_event(event: object) -> None:
        if isinstance(event, ModelCallFallback):
            fallbacks.append((event.from_provider, event.to_provider, event.error_type))

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        believing = RetryConfig(max_retry_after=10.0, max_unconfirmed_pause=10.0)
        ref = ref.with_retry(believing).observed(TurnEmitter(1, (on_event,)), 2)
        # a's 429 asks for 30 s, beyond the bound: a fails at once, b answers
        assert (await ref.chat_completion(ChatRequest.of("one"))).text == "b"
        await trio.sleep(5.0)
        # a's gate is still closed (for the bound, 10 s): skipped without being asked
        assert (await ref.chat_completion(ChatRequest.of("two"))).text == "b"
        await trio.sleep(6.0)
        # reopened: a answers again
        assert (await ref.chat_completion(ChatRequest.of("three"))).text == "a"
    assert log == [("a", 0.0), ("b", 0.0), ("b", 5.0), ("a", 11.0)]
    assert fallbacks == [("a", "b", "RateLimited"), ("a", "b", None)]


async def test_a_stream_falls_back_before_its_first_content() -> None:
    log: list[tuple[str, float]] = []
    provider = FallbackProvider(
        _answering("a", log, lambda n: ErrorReply(status_code=529)),
        _answering("b", log, lambda n: reply_text("streamed by b")),
    )
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider, retry=RetryConfig.disabled())
        assert await _read(ref) == "streamed by b"
    assert [name for name, _ in log] == ["a", "b"]


async def test_a_stream_never_falls_back_after_its_content() -> None:
    """No replay from another model: a retryable failure after the first content reaches
    the consumer as is, and the fallback is never asked."""
    log: list[tuple[str, float]] = []
    cut = StreamReply(response=reply_text("partial answer"), chunk_chars=2, cut_after=3)
    provider = FallbackProvider(
        _answering("a", log, lambda n: cut),
        _answering("b", log, lambda n: reply_text("never")),
        on=(StreamError, KovaConnectionError, ProviderErrorClass.OVERLOADED),
    )
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(StreamError):
            await _read(ref)
    assert [name for name, _ in log] == ["a"]


async def test_used_directly_a_stream_never_falls_back_after_its_content() -> None:
    """The same rule without actors: the first content is out, so the failure after it is
    the stream's, whatever ``on`` says."""
    log: list[tuple[str, float]] = []
    cut = StreamReply(response=reply_text("partial answer"), chunk_chars=2, cut_after=3)
    provider = FallbackProvider(
        _answering("a", log, lambda n: cut),
        _answering("b", log, lambda n: reply_text("never")),
        on=lambda error: True,
    )
    got: list[str] = []
    async with provider.open():
        with pytest.raises(StreamError):
            async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
                async for batch in batches:
                    got.extend(e.text for e in batch if isinstance(e, TextDelta))
    assert "".join(got) == "partia"  # three chunks of two characters, then the cut
    assert [name for name, _ in log] == ["a"]


async def test_used_directly_it_walks_the_same_order_without_actors() -> None:
    log: list[tuple[str, float]] = []
    provider = FallbackProvider(
        _answering("a", log, lambda n: ErrorReply(status_code=404)),
        _answering("b", log, lambda n: reply_text("b answers")),
    )
    async with provider.open():
        assert (await provider.chat_completion(ChatRequest.of("hi"))).text == "b answers"
        assert await _read(provider) == "b answers"
        assert await provider.count_tokens(ChatRequest.of("hi")) > 0
        assert await provider.list_models()
    assert [name for name, _ in log] == ["a", "b", "a", "b"]


def test_on_takes_a_function_classes_or_error_classes() -> None:
    a, b = ScriptedProvider([]), ScriptedProvider([])
    default = FallbackProvider(a, b)
    assert default.falls_back(RateLimited("slow"))
    assert default.falls_back(ModelNotFound("no such model"))
    assert not default.falls_back(InvalidRequest("bad"))
    assert not default.falls_back(RuntimeError("bug"))
    by_class = FallbackProvider(a, b, on=(InvalidRequest, ProviderErrorClass.RATE_LIMITED))
    assert by_class.falls_back(InvalidRequest("bad"))
    assert by_class.falls_back(RateLimited("slow"))
    assert not by_class.falls_back(ProviderOverloaded("busy"))
    assert FallbackProvider(a, b, on=lambda error: True).falls_back(RuntimeError("any"))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("not a provider", "x"), {}, "argument 0"),
        ((ScriptedProvider([]),), {}, "at least one fallback"),
        ((ScriptedProvider([]), ScriptedProvider([])), {"on": "RateLimited"}, "on must"),
        ((ScriptedProvider([]), ScriptedProvider([])), {"on": (42,)}, "on takes"),
    ],
)
def test_a_fallback_provider_refuses_what_it_cannot_use(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        FallbackProvider(*args, **kwargs)  # type: ignore[arg-type]


async def _read(provider: Provider) -> str:
    text: list[str] = []
    async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
        async for batch in batches:
            text += [event.text for event in batch if isinstance(event, TextDelta)]
    return "".join(text)
