"""The rate-limit gate's bound, as users meet it: every form a server says "wait" in (a
``Retry-After`` in seconds or as an HTTP date, Gemini's ``RetryInfo``) follows the same rule
(``RetryConfig.max_retry_after``)."""

from __future__ import annotations

import email.utils
import time

import httpx2
import pytest
import trio
import trio.testing

from kova import Message, RateLimited
from kova.agent import AgentBuilder, RetryConfig
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import ErrorReply, open_gemini_server, reply_text


async def test_gemini_retry_info_beyond_the_bound_fails_the_turn_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Gemini's ``RetryInfo`` asking for an hour: the turn fails at once with the server's
    3600 s, and the next turn goes out once the bound (60 s) has passed, not an hour later."""
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
            assert 60.0 <= trio.current_time() < 61.0
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
    assert sent_at == [0.0, 30.0]
