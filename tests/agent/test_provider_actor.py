"""The provider actor and ProviderRef, driven by the scripted provider."""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import structlog
import trio
import trio.testing

from kova import (
    InferenceConfig,
    InvalidRequest,
    KovaConnectionError,
    MailboxClosed,
    Message,
    ProviderOverloaded,
    RateLimited,
    StreamError,
    TextDelta,
    ToolDefinition,
)
from kova._observe import ModelCallRetrying, TurnEmitter
from kova.actors import Backoff, UnknownMessage, open_runtime
from kova.agent import RetryConfig
from kova.agent._provider_ref import ProviderRef, spawn_provider
from kova.providers import (
    ChatRequest,
    ModelInfo,
    ModelResponse,
    Provider,
    StreamEvent,
    heuristic_count_tokens,
)
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    Reply,
    ScriptedProvider,
    ScriptRequest,
    StreamReply,
    reply_text,
    stream_events,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

HISTORY = [Message.user("hi")]
CONFIG = InferenceConfig(model="m")


class RecordingProvider(ScriptedProvider):
    """A scripted provider that records how far each stream got and when it was closed."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.log: list[tuple[str, int, float]] = []

    @asynccontextmanager
    async def chat_completion_stream(
        self, request: ChatRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[StreamEvent]]]:
        async with super().chat_completion_stream(request) as batches:
            recorded = self._recorded(batches)
            try:
                yield recorded
            finally:
                await recorded.aclose()  # type: ignore[attr-defined]
                self.log.append(("closed", 0, trio.current_time()))

    async def _recorded(
        self, batches: AsyncIterator[Sequence[StreamEvent]]
    ) -> AsyncIterator[Sequence[StreamEvent]]:
        count = 0
        async for batch in batches:
            count += 1
            self.log.append(("read", count, trio.current_time()))
            yield batch


async def test_provider_ref_is_a_provider_and_answers() -> None:
    provider = ScriptedProvider([reply_text("hello")])
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        assert isinstance(ref, Provider)
        assert ref.name == "scripted"
        assert ref.ref.name == "provider.scripted"
        assert provider.open_count == 1  # the actor holds provider.open()
        async with ref.open():
            response = await ref.chat_completion(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            )
        assert response.text == "hello"
        assert provider.requests[0].messages == tuple(HISTORY)
    assert provider.open_count == 0


async def test_list_models_and_count_tokens_through_the_actor() -> None:
    provider = ScriptedProvider([])
    tools = [ToolDefinition(name="t", description="a tool")]
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        assert await ref.list_models() == [ModelInfo(id="scripted", owned_by="scripted")]
        assert await ref.count_tokens(
            ChatRequest(messages=HISTORY, tools=tools, config=CONFIG)
        ) == heuristic_count_tokens(HISTORY, tools)


async def test_many_concurrent_requests_are_served_at_once(
    autojump_clock: trio.testing.MockClock,
):
    provider = FunctionProvider(lambda request: reply_text("ok"), latency=1.0)
    finished: list[float] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)

        async def ask() -> None:
            assert (
                await ref.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
            ).text == "ok"
            finished.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            for _ in range(40):
                nursery.start_soon(ask)
    assert finished == [1.0] * 40


async def test_max_in_flight_caps_concurrent_requests(autojump_clock: trio.testing.MockClock):
    provider = FunctionProvider(lambda request: reply_text("ok"), latency=1.0)
    finished: list[float] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider, max_in_flight=2)

        async def ask() -> None:
            await ref.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
            finished.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(ask)
    assert sorted(finished) == [1.0, 1.0, 2.0, 2.0, 3.0]


async def test_stream_through_the_actor_delivers_the_batches() -> None:
    reply = reply_text("a fairly long answer, streamed in pieces")
    provider = ScriptedProvider([reply], batch_size=3)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        async with ref.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ) as batches:
            received = [list(batch) async for batch in batches]
    assert all(len(batch) <= 3 for batch in received)
    assert [event for batch in received for event in batch] == list(stream_events(reply))


async def test_leased_stream_reads_only_what_the_consumer_asks_for(
    autojump_clock: trio.testing.MockClock,
):
    reply = StreamReply(response=reply_text("x" * 100), chunk_chars=1)  # 102 events
    provider = RecordingProvider([reply], batch_size=1)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        async with ref.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ) as batches:
            await trio.testing.wait_all_tasks_blocked()
            # The actor read the first batch with content (to retry errors before it), and
            # nothing more until the consumer asks.
            assert [entry[:2] for entry in provider.log if entry[0] == "read"] == [("read", 1)]
            total = 0
            async for batch in batches:
                total += len(batch)
        assert total == 102


async def test_leased_streams_count_against_max_in_flight(
    autojump_clock: trio.testing.MockClock,
):
    provider = FunctionProvider(lambda request: reply_text("ok"), latency=1.0)
    started: list[float] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider, max_in_flight=1)

        async def stream_for(seconds: float) -> None:
            async with ref.chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            ) as batches:
                started.append(trio.current_time())
                async for _batch in batches:
                    pass
                await trio.sleep(seconds)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream_for, 5.0)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(stream_for, 0.0)
    assert started == [1.0, 7.0]


async def test_leaving_a_stream_early_closes_the_provider_stream_first(
    autojump_clock: trio.testing.MockClock,
):
    reply = StreamReply(response=reply_text("y" * 100), chunk_chars=1)
    provider = RecordingProvider([reply], batch_size=1, batch_delay=1.0)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        async with ref.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ) as batches:
            async for _batch in batches:
                if trio.current_time() >= 3.0:
                    break
        left_at = trio.current_time()
        assert provider.log[-1] == ("closed", 0, left_at)
        reads = [count for kind, count, _ in provider.log if kind == "read"]
        assert max(reads) < 10


async def test_cancelling_the_consumer_mid_stream_stops_the_producer(
    autojump_clock: trio.testing.MockClock,
):
    reply = StreamReply(response=reply_text("z" * 100), chunk_chars=1)
    provider = RecordingProvider([reply], batch_size=1, batch_delay=1.0)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with trio.move_on_after(4.5):
            async with ref.chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            ) as batches:
                async for _batch in batches:
                    pass
        assert trio.current_time() == 4.5
        assert provider.log[-1] == ("closed", 0, 4.5)


async def test_stream_errors_reach_the_consumer() -> None:
    provider = ScriptedProvider(
        [
            ErrorReply(status_code=429, retry_after=0.0),
            StreamReply(response=reply_text("abcdefgh"), chunk_chars=1, cut_after=3),
        ],
        batch_size=1,
    )
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider, retry=RetryConfig.disabled())
        with pytest.raises(RateLimited):
            async with ref.chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            ):
                pytest.fail("entered a rate-limited stream")
        received = []
        with pytest.raises(StreamError):
            async with ref.chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            ) as batches:
                async for batch in batches:
                    received.extend(batch)
        assert len(received) == 3
        # request errors do not crash the actor
        assert provider.open_count == 1


async def test_rate_limit_pauses_every_request_until_retry_after(
    autojump_clock: trio.testing.MockClock,
):
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=5.0)
        return reply_text("ok")

    provider = FunctionProvider(model)
    finished: list[float] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        await trio.sleep(1.0)
        with pytest.raises(RateLimited):
            await ref.with_retry(RetryConfig.disabled()).chat_completion(ChatRequest.of("hi"))
        assert trio.current_time() == 1.0

        async def ask(delay: float) -> None:
            await trio.sleep(delay)
            await ref.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
            finished.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            for delay in (0.0, 2.0, 4.0, 7.0):
                nursery.start_soon(ask, delay)
    # three requests arrived inside the pause and were held until 1 + 5; the last came later
    assert sent_at == [1.0, 6.0, 6.0, 6.0, 8.0]
    assert sorted(finished) == [6.0, 6.0, 6.0, 8.0]


async def test_a_caller_whose_retries_are_off_fails_at_once_while_the_gate_is_closed(
    autojump_clock: trio.testing.MockClock,
):
    """It never waits on the gate: RateLimited at once, its retry_after the time left."""
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=10.0)
        return reply_text("ok")

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        off = ref.with_retry(RetryConfig.disabled())
        with pytest.raises(RateLimited):
            await off.chat_completion(ChatRequest.of("first"))
        await trio.sleep(4.0)
        # one rate limit closes the gate for max_unconfirmed_pause (5 s): 1 s left
        with pytest.raises(RateLimited) as refused:
            await off.chat_completion(ChatRequest.of("call"))
        assert refused.value.retry_after == 1.0
        with pytest.raises(RateLimited) as refused:
            async with off.chat_completion_stream(ChatRequest.of("stream")):
                pytest.fail("entered a stream through a closed gate")
        assert refused.value.retry_after == 1.0
        with pytest.raises(RateLimited):
            await off.count_tokens(ChatRequest.of("count"))
        assert trio.current_time() == 4.0  # nobody waited
        # a caller that retries waits for the gate and goes out when it opens
        assert (await ref.chat_completion(ChatRequest.of("later"))).text == "ok"
    assert sent_at == [0.0, 5.0]


async def test_a_retry_after_beyond_the_bound_fails_at_once_and_holds_the_others_5_s(
    autojump_clock: trio.testing.MockClock,
):
    """``Retry-After: 3600`` is not waited for: the call fails at once carrying the server's
    3600, and the gate closes for max_unconfirmed_pause (5 s by default: one answer is not
    believed for longer), so the next call goes out 5 s later, not a minute or an hour."""
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=3600.0)
        return reply_text("ok")

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        with pytest.raises(RateLimited) as limited:
            await ref.chat_completion(ChatRequest.of("first"))  # retries on (two left)
        assert limited.value.retry_after == 3600.0
        assert trio.current_time() == 0.0
        assert (await ref.chat_completion(ChatRequest.of("second"))).text == "ok"
    assert sent_at == [0.0, 5.0]


async def test_a_caller_with_a_shorter_bound_than_the_gate_s_time_left_fails_at_once(
    autojump_clock: trio.testing.MockClock,
):
    def model(request: ScriptRequest) -> Reply:
        return ErrorReply(status_code=429, retry_after=50.0)

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        believing = RetryConfig(max_retries=0, max_unconfirmed_pause=60.0)
        with pytest.raises(RateLimited):
            await ref.with_retry(believing).chat_completion(ChatRequest.of("a"))
        with pytest.raises(RateLimited) as refused:
            await ref.with_retry(RetryConfig(max_retry_after=30.0)).chat_completion(
                ChatRequest.of("b")
            )
        assert refused.value.retry_after == 50.0
        assert trio.current_time() == 0.0


async def test_rate_limit_on_stream_also_pauses(autojump_clock: trio.testing.MockClock):
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=3.0)
        return reply_text("ok")

    provider = FunctionProvider(model)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(RateLimited):
            async with ref.with_retry(RetryConfig.disabled()).chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
            ):
                pass
        assert (
            await ref.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
        ).text == "ok"
    assert sent_at == [0.0, 3.0]


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_a_provider_bug_fails_only_its_caller_while_another_request_completes(
    autojump_clock: trio.testing.MockClock, streamed: bool
):
    """A provider that raises something unexpected fails that one request with the error,
    logged once; the actor is not restarted and a second caller's request in flight at the
    same time completes."""
    done: list[tuple[str, float]] = []

    async def model(request: ScriptRequest) -> Reply:
        if request.messages[-1].text == "bad":
            await trio.sleep(1.0)
            raise RuntimeError("codec bug")
        await trio.sleep(2.0)
        return reply_text("fine")

    async def ask(provider: Provider, text: str) -> str:
        if streamed:
            return await _read_stream(provider, ChatRequest.of(text))
        return (await provider.chat_completion(ChatRequest.of(text))).text

    provider = FunctionProvider(model)
    async with open_runtime(backoff=Backoff.none()) as runtime:
        ref = await spawn_provider(runtime, provider)

        async def good() -> None:
            done.append((await ask(ref, "good"), trio.current_time()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(good)
            with pytest.raises(RuntimeError, match="codec bug"):
                await ask(ref, "bad")
            assert trio.current_time() == 1.0
        assert done == [("fine", 2.0)]
        assert provider.open_count == 1  # never reopened: the actor did not restart
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(RuntimeError, match="codec bug"):
                await ask(ref, "bad")
            assert await ask(ref, "again") == "fine"
    failed = [entry for entry in logs if entry["event"] == "provider.request.failed"]
    assert [entry["error"] for entry in failed] == ["RuntimeError: codec bug"]
    assert not [entry for entry in logs if entry["event"] == "actor.crashed"]


async def test_two_providers_with_one_name_get_distinct_actors() -> None:
    async with open_runtime() as runtime:
        first = await spawn_provider(runtime, ScriptedProvider([reply_text("1")]))
        second = await spawn_provider(runtime, ScriptedProvider([reply_text("2")]))
        assert first.ref.name != second.ref.name
        assert (
            await second.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
        ).text == "2"
        assert (
            await first.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
        ).text == "1"


async def test_stopped_provider_ref_raises_mailbox_closed() -> None:
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, ScriptedProvider([]))
        await ref.stop()
        with pytest.raises(MailboxClosed):
            await ref.list_models()
        assert isinstance(ref, ProviderRef)


async def test_cancelled_call_cancels_the_provider_request_before_returning(
    autojump_clock: trio.testing.MockClock,
):
    events: list[tuple[str, float]] = []

    async def model(request: ScriptRequest) -> Reply:
        try:
            await trio.sleep(100)  # the HTTP request in flight
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.25)  # closing the connection takes a moment
            events.append(("provider request ended", trio.current_time()))
        return reply_text("never")

    provider = FunctionProvider(model)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with trio.move_on_after(2):
            await ref.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
        events.append(("call returned", trio.current_time()))
    assert events == [("provider request ended", 2.25), ("call returned", 2.25)]


async def test_the_actor_retries_with_the_request_s_policy_and_the_gate(
    autojump_clock: trio.testing.MockClock,
):
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=2.0)
        if len(sent_at) == 2:
            return ErrorReply(status_code=529)
        return reply_text("ok")

    provider = FunctionProvider(model)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        retry = RetryConfig(max_retries=2, initial_backoff=0.5, multiplier=2.0)
        answer = await ref.with_retry(retry).chat_completion(ChatRequest.of("hi"))
    assert answer.text == "ok"
    # retry_after wins for the 429 (and pauses the gate); the 529 backs off 0.5 * 2**1.
    assert sent_at == [0.0, 2.0, 3.0]


async def test_count_tokens_and_list_models_pass_the_rate_limit_gate(
    autojump_clock: trio.testing.MockClock,
):
    calls = 0

    def model(request: ScriptRequest) -> Reply:
        nonlocal calls
        calls += 1
        return ErrorReply(status_code=429, retry_after=4.0)

    provider = FunctionProvider(model)
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(RateLimited):
            await ref.with_retry(RetryConfig.disabled()).chat_completion(ChatRequest.of("hi"))
        await ref.count_tokens(ChatRequest.of("hi"))
        assert trio.current_time() == 4.0
        await ref.list_models()
        assert trio.current_time() == 4.0


async def test_an_unknown_message_fails_the_request_and_never_the_actor() -> None:
    provider = ScriptedProvider([reply_text("still here")])
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(UnknownMessage, match="does not handle call str"):
            await ref.ref.call("hello")
        answer = await ref.chat_completion(ChatRequest.of("hi"))
    assert answer.text == "still here"


async def test_an_overload_event_before_any_content_is_retried_like_http_529(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One HTTP call answered 200 with an ``overloaded_error`` event first thing: the actor
    retries it exactly as it would retry HTTP 529, and the consumer sees only the answer."""
    from kova.providers import ErrorEvent
    from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
    from kova.testing import open_anthropic_server

    overloaded = StreamReply(
        response=reply_text("unused"),
        events=(ErrorEvent(message="Overloaded", error_type="overloaded_error"),),
    )
    async with open_anthropic_server(
        [overloaded, reply_text("Hello after the overload")]
    ) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-test", api_key="sk-test", base_url=server.base_url)
        )
        async with open_runtime() as runtime:
            ref = await spawn_provider(runtime, provider)
            retry = RetryConfig(max_retries=2, initial_backoff=1.5)
            received = []
            async with ref.with_retry(retry).chat_completion_stream(
                ChatRequest.of("hi")
            ) as batches:
                async for batch in batches:
                    received.extend(batch)
            assert trio.current_time() == 1.5  # one backoff, as for a 529
    text = "".join(event.text for event in received if isinstance(event, TextDelta))
    assert text == "Hello after the overload"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "request_value",
    [
        "hello",
        ChatRequest.of("hi", tools=["not a tool"]),  # type: ignore[list-item]
        ChatRequest(messages=["not a message"]),  # type: ignore[list-item]
    ],
)
async def test_a_malformed_request_fails_its_caller_and_never_the_shared_actor(
    request_value: object,
) -> None:
    provider = ScriptedProvider([reply_text("fine")])
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(TypeError):
            await ref.chat_completion(request_value)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            async with ref.chat_completion_stream(request_value):  # type: ignore[arg-type]
                pass
        assert (await ref.chat_completion(ChatRequest.of("hi"))).text == "fine"
        assert len(provider.requests) == 1  # nothing malformed was sent


def _recording_hooks(ref: ProviderRef, hooks: list[tuple[str, trio.lowlevel.Task]]) -> ProviderRef:
    """``ref`` with two retries 0.5 s apart, observed by a subscriber that records the task
    each ``ModelCallRetrying`` was delivered in."""

    def on_event(event: object) -> None:
        if isinstance(event, ModelCallRetrying):
            hooks.append(("retry", trio.lowlevel.current_task()))

    retry = RetryConfig(max_retries=2, initial_backoff=0.5)
    return ref.with_retry(retry).observed(TurnEmitter(1, (on_event,)), 2)


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_every_request_is_sent_from_the_caller_s_task_with_or_without_a_cap(
    streamed: bool,
) -> None:
    """One path: the actor admits, the caller's task sends the request (no task per request
    in the actor), whether the provider has an in-flight cap or not."""
    senders: list[trio.lowlevel.Task] = []

    def model(request: ScriptRequest) -> Reply:
        senders.append(trio.lowlevel.current_task())
        return reply_text("ok")

    async def ask(provider: Provider) -> str:
        if streamed:
            return await _read_stream(provider, ChatRequest.of("hi"))
        return (await provider.chat_completion(ChatRequest.of("hi"))).text

    async with open_runtime() as runtime:
        uncapped = await spawn_provider(runtime, FunctionProvider(model))
        capped = await spawn_provider(runtime, FunctionProvider(model), max_in_flight=1)
        assert await ask(uncapped) == "ok"
        assert senders[-1] is trio.lowlevel.current_task()
        assert await ask(capped) == "ok"
        assert senders[-1] is trio.lowlevel.current_task()


async def test_a_leased_call_s_failures_are_decided_by_its_admission_in_the_caller_s_task(
    autojump_clock: trio.testing.MockClock,
):
    """The actor's admission holds the policy of a call its caller sends, and decides a
    failure where it happened: the retry is reported in the caller's task (no message to
    the actor), and the retry waits the backoff it decided."""
    sent_at: list[float] = []
    hooks: list[tuple[str, trio.lowlevel.Task]] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=529)
        return reply_text("ok")

    async with open_runtime() as runtime:
        observed = _recording_hooks(await spawn_provider(runtime, FunctionProvider(model)), hooks)
        assert (await observed.chat_completion(ChatRequest.of("hi"))).text == "ok"
        caller = trio.lowlevel.current_task()
    assert sent_at == [0.0, 0.5]
    assert [kind for kind, _task in hooks] == ["retry"]
    assert all(task is caller for _kind, task in hooks)


async def test_an_orderly_stop_lets_a_leased_call_finish_before_closing_the_provider(
    autojump_clock: trio.testing.MockClock,
):
    provider = FunctionProvider(lambda request: reply_text("done"), latency=1.0)
    answers: list[tuple[str, float, int]] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)

        async def ask() -> None:
            answer = await ref.chat_completion(ChatRequest.of("hi"))
            answers.append((answer.text, trio.current_time(), provider.open_count))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.sleep(0.5)
            await ref.stop()
            assert trio.current_time() == 1.0  # the stop waited for the call in flight
            assert provider.open_count == 0
    assert answers == [("done", 1.0, 1)]  # answered while the provider was still open


class _GroupRaising(ScriptedProvider):
    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        raise ExceptionGroup("two failures", [InvalidRequest("a"), InvalidRequest("b")])


async def test_a_leased_call_s_request_error_group_reaches_its_caller_as_is() -> None:
    provider = _GroupRaising([])
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        with pytest.raises(ExceptionGroup) as raised:
            await ref.chat_completion(ChatRequest.of("hi"))
        assert [str(e) for e in raised.value.exceptions] == ["a", "b"]
        await ref.list_models()  # the actor is still serving
    assert provider.open_count == 0


async def _read_stream(provider: Provider, request: ChatRequest) -> str:
    text = []
    async with provider.chat_completion_stream(request) as batches:
        async for batch in batches:
            text += [event.text for event in batch if isinstance(event, TextDelta)]
    return "".join(text)


async def test_a_leased_stream_s_failures_before_content_are_retried_by_its_admission(
    autojump_clock: trio.testing.MockClock,
):
    """The actor's admission holds the policy of a stream the caller opened: a rate limit
    before any content is decided in the reading task (reported there, no message to the
    actor), pauses the gate for every request, and is retried after the wait; a request sent
    while the gate is closed waits for it."""
    sent_at: list[float] = []
    hooks: list[tuple[str, trio.lowlevel.Task]] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return ErrorReply(status_code=429, retry_after=2.0)
        return reply_text("ok")

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        observed = _recording_hooks(ref, hooks)
        readers: list[trio.lowlevel.Task] = []

        async def read_first() -> None:
            readers.append(trio.lowlevel.current_task())
            await _read_stream(observed, ChatRequest.of("first"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_first)
            await trio.sleep(1.0)
            # the gate is closed until 2.0: this one waits for it
            assert await _read_stream(ref, ChatRequest.of("second")) == "ok"
    assert sorted(sent_at) == [0.0, 2.0, 2.0]
    assert [kind for kind, _task in hooks] == ["retry"]
    assert all(task is readers[0] for _kind, task in hooks)


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_a_request_gives_up_when_its_retries_are_spent(
    autojump_clock: trio.testing.MockClock, streamed: bool
):
    sent_at: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        return ErrorReply(status_code=529)

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        limited = ref.with_retry(RetryConfig(max_retries=2, initial_backoff=0.5))
        # (a loop that never counted its attempts would retry until this fails it)
        with trio.fail_after(60), pytest.raises(ProviderOverloaded):
            if streamed:
                await _read_stream(limited, ChatRequest.of("hi"))
            else:
                await limited.chat_completion(ChatRequest.of("hi"))
        assert await ref.list_models()  # the actor is still serving
    assert sent_at == [0.0, 0.5, 1.5]  # two retries, backing off 0.5 then 1.0


async def test_a_raising_subscriber_of_retries_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sent: list[float] = []

    def model(request: ScriptRequest) -> Reply:
        sent.append(trio.current_time())
        return ErrorReply(status_code=529) if len(sent) == 1 else reply_text("ok")

    seen: list[ModelCallRetrying] = []

    def on_event(event: object) -> None:
        if isinstance(event, ModelCallRetrying):
            seen.append(event)
        raise ValueError("observer bug")

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        emitter = TurnEmitter(7, (on_event,))
        observed = ref.with_retry(RetryConfig(initial_backoff=1.0)).observed(emitter, 8)
        assert (await observed.chat_completion(ChatRequest.of("hi"))).text == "ok"
        assert (await ref.chat_completion(ChatRequest.of("again"))).text == "ok"
    assert sent == [0.0, 1.0, 1.0]
    (retrying,) = seen
    assert (retrying.turn_id, retrying.span_id, retrying.attempt) == (7, 8, 1)
    assert (retrying.error_type, retrying.error_class, retrying.wait) == (
        "ProviderOverloaded",
        "overloaded",
        1.0,
    )


async def test_an_error_after_content_of_a_leased_stream_is_never_retried() -> None:
    calls: list[int] = []

    def model(request: ScriptRequest) -> Reply:
        calls.append(1)
        return StreamReply(response=reply_text("partial answer"), chunk_chars=1, cut_after=3)

    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, FunctionProvider(model))
        with pytest.raises(StreamError):
            await _read_stream(ref, ChatRequest.of("hi"))
    assert calls == [1]


class _DropsAfterContent(ScriptedProvider):
    """A provider whose every stream sends one batch of content, then fails with an error
    that is retryable in itself (the connection dropped) and not marked as after content."""

    opened = 0

    @asynccontextmanager
    async def chat_completion_stream(
        self, request: ChatRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[StreamEvent]]]:
        self.opened += 1

        async def batches() -> AsyncIterator[Sequence[StreamEvent]]:
            yield [TextDelta(text="partial")]
            raise KovaConnectionError("connection dropped")

        yield batches()


async def test_a_stream_is_never_retried_after_its_content_even_on_a_retryable_error(
    autojump_clock: trio.testing.MockClock,
):
    """No replay: once content reached the consumer, even an error the policy would retry
    reaches it as is, whatever the provider marked on the error."""
    provider = _DropsAfterContent([])
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)
        received: list[StreamEvent] = []
        with trio.fail_after(60), pytest.raises(KovaConnectionError):
            async with ref.chat_completion_stream(ChatRequest.of("hi")) as batches:
                async for batch in batches:
                    received.extend(batch)
    assert received == [TextDelta(text="partial")]
    assert provider.opened == 1


class _RateLimitedAfterContent(ScriptedProvider):
    """A provider whose first stream sends content, then a rate limit with a server delay;
    every later request is answered."""

    streams = 0

    def __init__(self, retry_after: float) -> None:
        super().__init__([reply_text("ok")] * 4)
        self.retry_after = retry_after
        self.calls: list[float] = []

    @asynccontextmanager
    async def chat_completion_stream(
        self, request: ChatRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[StreamEvent]]]:
        self.streams += 1
        retry_after = self.retry_after

        async def batches() -> AsyncIterator[Sequence[StreamEvent]]:
            yield [TextDelta(text="partial")]
            raise RateLimited("slow down", retry_after=retry_after, mid_stream=True)

        yield batches()

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        self.calls.append(trio.current_time())
        return await super().chat_completion(request)


@pytest.mark.parametrize(
    ("retry_after", "believed", "reopens"),
    [(4.0, 5.0, 4.0), (3600.0, 5.0, 5.0), (30.0, math.inf, 30.0), (3600.0, math.inf, 60.0)],
)
async def test_a_stream_rate_limited_after_its_content_closes_the_gate_for_the_others(
    autojump_clock: trio.testing.MockClock, retry_after: float, believed: float, reopens: float
):
    """Never retried (content reached the consumer), yet the others back off: the gate
    closes for the server's delay, at most the stream's max_unconfirmed_pause (then at
    most max_retry_after)."""
    provider = _RateLimitedAfterContent(retry_after)
    async with open_runtime() as runtime:
        ref = await spawn_provider(
            runtime, provider, retry=RetryConfig(max_unconfirmed_pause=believed)
        )
        received: list[StreamEvent] = []
        with pytest.raises(RateLimited):
            async with ref.chat_completion_stream(ChatRequest.of("hi")) as batches:
                async for batch in batches:
                    received.extend(batch)
        assert received == [TextDelta(text="partial")]
        assert provider.streams == 1
        await trio.testing.wait_all_tasks_blocked()  # the actor read what the stream reported
        with pytest.raises(RateLimited) as refused:
            await ref.with_retry(RetryConfig.disabled()).chat_completion(ChatRequest.of("a"))
        assert refused.value.retry_after == reopens
        assert (await ref.chat_completion(ChatRequest.of("b"))).text == "ok"
    assert provider.calls == [reopens]


async def test_an_orderly_stop_waits_for_a_leased_stream_to_close(
    autojump_clock: trio.testing.MockClock,
):
    provider = RecordingProvider(
        [StreamReply(response=reply_text("0123"), chunk_chars=1)],
        batch_size=1,
        batch_delay=1.0,
    )
    done: list[tuple[str, float]] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, provider)

        async def consume() -> None:
            text = await _read_stream(ref, ChatRequest.of("hi"))
            done.append((text, trio.current_time()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await trio.sleep(0.5)
            await ref.stop()
            assert provider.open_count == 0
    assert done[0][0].startswith("0123")
    assert provider.log[-1][0] == "closed"
    assert provider.log[-1][2] <= done[0][1]  # closed before the provider was


class _Instant(ScriptedProvider):
    """Answers without a checkpoint, so any scheduler pass in a call is kova's."""

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        return reply_text("instant")


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


async def test_admission_costs_no_scheduler_pass_with_no_cap_and_the_gate_open() -> None:
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, _Instant([]))
        await ref.chat_completion(ChatRequest.of("first"))  # fetches the admission once
        steps = _Steps()
        trio.lowlevel.add_instrument(steps)
        try:
            for _ in range(10):
                assert (await ref.chat_completion(ChatRequest.of("hi"))).text == "instant"
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert steps.steps == 0  # the caller never yielded: no task step at all
        capped = await spawn_provider(runtime, _Instant([]), max_in_flight=2)
        await capped.chat_completion(ChatRequest.of("first"))
        trio.lowlevel.add_instrument(steps)
        try:
            await capped.chat_completion(ChatRequest.of("hi"))
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert steps.steps == 0  # a free slot is borrowed without waiting, too
