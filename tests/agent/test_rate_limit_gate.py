"""The rate-limit gate's bound, as users meet it: every form a server says "wait" in (a
``Retry-After`` in seconds or as an HTTP date, Gemini's ``RetryInfo``) follows the same rule
(``RetryConfig.max_retry_after``)."""

from __future__ import annotations

import email.utils
import math
import time

import httpx2
import pytest
import trio
import trio.testing

from kova import Message, RateLimited
from kova.actors import open_runtime
from kova.agent import AgentBuilder, RetryConfig, spawn_provider
from kova.providers import ChatRequest, ModelResponse
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    Reply,
    ScriptRequest,
    open_gemini_server,
    reply_text,
)


async def test_gemini_retry_info_beyond_the_bound_fails_the_turn_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Gemini's ``RetryInfo`` asking for an hour: the turn fails at once with the server's
    3600 s, and the next turn goes out once one rate limit's bound (5 s) has passed, not an
    hour later."""
    script = [ErrorReply(status_code=429, retry_after=3600.0), reply_text("back")]
    async with open_gemini_server(script) as server:
        provider = GeminiProvider(
            GeminiConfig(model="gemini-fake", base_url=server.base_url, api_key="k")
        )
        async with AgentBuilder().provider(provider).build() as agent:
            with pytest.raises(RateLimited) as limited:
                await agent.run("first")
            assert limited.value.retry_after == 3600.0
            assert trio.current_time() < 1.0
            assert (await agent.run("second")).text == "back"
            assert 5.0 <= trio.current_time() < 6.0
    assert len(server.requests) == 2


async def test_an_http_date_retry_after_follows_the_same_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sent_at: list[float] = []
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent_at.append(trio.current_time())
        if len(sent_at) == 1:
            return httpx2.Response(
                429,
                headers={"retry-after": in_an_hour},
                json={"error": {"message": "quota", "type": "rate_limit_exceeded"}},
            )
        return httpx2.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "gpt-x",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
            },
        )

    provider = OpenAiCompatibleProvider(
        OpenAiConfig(model="gpt-x", api_key="k", base_url="http://api.test/v1"),
        transport=httpx2.MockTransport(handler),
    )
    retry = RetryConfig(max_retries=3, max_retry_after=30.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        with pytest.raises(RateLimited) as limited:
            await agent.run([Message.user("hi")])
        assert limited.value.retry_after is not None
        assert 3500 < limited.value.retry_after <= 3600
        assert (await agent.run([Message.user("again")])).text == "ok"
    assert sent_at == [0.0, 5.0]


# --- what one answer can make the neighbours wait (issue 43, item 6) ------------------------


def _limited_then_ok(sent_at: list[float], limits: list[float | None]) -> FunctionProvider:
    """A provider whose n-th request is rate limited with ``limits[n]`` (``None``: answered);
    answered once the list runs out."""

    def model(request: ScriptRequest) -> Reply:
        sent_at.append(trio.current_time())
        wait = limits[len(sent_at) - 1] if len(sent_at) <= len(limits) else None
        if wait is None:
            return reply_text(f"ok {request.messages[-1].text}")
        return ErrorReply(status_code=429, retry_after=wait)

    return FunctionProvider(model)


async def test_one_hostile_retry_after_holds_the_neighbours_5_s_not_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``Retry-After: 3600`` once: its caller fails at once, and the agents sharing the
    provider wait max_unconfirmed_pause (5 s), not max_retry_after (60 s)."""
    sent_at: list[float] = []
    finished: dict[str, float] = {}
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, _limited_then_ok(sent_at, [3600.0]))
        victim = AgentBuilder().provider(shared).runtime(runtime).build()
        neighbours = [AgentBuilder().provider(shared).runtime(runtime).build() for _ in range(3)]
        async with victim, neighbours[0], neighbours[1], neighbours[2]:
            with pytest.raises(RateLimited) as limited:
                await victim.run("victim")
            assert limited.value.retry_after == 3600.0
            assert trio.current_time() == 0.0

            async def ask(number: int) -> None:
                await trio.sleep(number)  # asking at 0, 1 and 2 s
                response = await neighbours[number].run(f"n{number}")
                finished[response.text] = trio.current_time()

            async with trio.open_nursery() as nursery:
                for number in range(3):
                    nursery.start_soon(ask, number)
    assert finished == {"ok n0": 5.0, "ok n1": 5.0, "ok n2": 5.0}
    assert sent_at == [0.0, 5.0, 5.0, 5.0]


async def test_a_repeated_rate_limit_closes_the_gate_for_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A second rate limit within the first one's delay confirms it: the gate closes for up to
    max_retry_after (60 s), and a neighbour waits that long."""
    sent_at: list[float] = []
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, _limited_then_ok(sent_at, [3600.0, 3600.0]))
        off = shared.with_retry(RetryConfig(max_retries=0))
        with pytest.raises(RateLimited):
            await off.chat_completion(ChatRequest.of("first"))
        with pytest.raises(RateLimited) as refused:
            await off.chat_completion(ChatRequest.of("refused"))  # not sent: the gate
        assert refused.value.retry_after == 5.0
        await trio.sleep(5.0)  # the gate reopens after one answer's 5 s
        with pytest.raises(RateLimited):
            await off.chat_completion(ChatRequest.of("second"))  # the same hour again
        with pytest.raises(RateLimited) as refused:
            await off.chat_completion(ChatRequest.of("refused"))
        assert refused.value.retry_after == 60.0
        response = await shared.chat_completion(ChatRequest.of("neighbour"))
        assert response.text == "ok neighbour"
    assert sent_at == [0.0, 5.0, 65.0]


async def test_a_short_retry_after_is_waited_as_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A delay within max_unconfirmed_pause is believed at once: the neighbour waits 2 s."""
    sent_at: list[float] = []
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, _limited_then_ok(sent_at, [2.0]))
        with pytest.raises(RateLimited):
            await shared.with_retry(RetryConfig.disabled()).chat_completion(ChatRequest.of("a"))
        assert (await shared.chat_completion(ChatRequest.of("b"))).text == "ok b"
    assert sent_at == [0.0, 2.0]


class _Raising(FunctionProvider):
    """Raises a RateLimited of its own making (a provider written by hand) once."""

    def __init__(self, retry_after: float, sent_at: list[float]) -> None:
        super().__init__(lambda request: reply_text("ok"))
        self.retry_after = retry_after
        self.sent_at = sent_at

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        self.sent_at.append(trio.current_time())
        if len(self.sent_at) == 1:
            raise RateLimited("slow down", provider="hand", retry_after=self.retry_after)
        return await super().chat_completion(request)


@pytest.mark.parametrize(
    ("retry_after", "retried_at"), [(-5.0, 0.0), (-math.inf, 0.0), (0.0, 0.0), (1.5, 1.5)]
)
async def test_a_provider_s_negative_retry_after_is_retried_at_once(
    autojump_clock: trio.testing.MockClock, retry_after: float, retried_at: float
) -> None:
    sent_at: list[float] = []
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, _Raising(retry_after, sent_at))
        assert (await shared.chat_completion(ChatRequest.of("a"))).text == "ok"
    assert sent_at == [0.0, retried_at]


async def test_a_provider_s_nan_retry_after_is_never_waited_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sent_at: list[float] = []
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, _Raising(math.nan, sent_at))
        with pytest.raises(RateLimited):
            await shared.chat_completion(ChatRequest.of("a"))
        # the gate stayed open: a caller whose retries are off goes out at once
        off = shared.with_retry(RetryConfig.disabled())
        assert (await off.chat_completion(ChatRequest.of("b"))).text == "ok"
    assert sent_at == [0.0, 0.0]
