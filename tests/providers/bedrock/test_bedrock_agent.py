"""The Bedrock provider under an agent: an exception inside a ConverseStream is retried like
the HTTP error of the same name while no content has reached the consumer, never after."""

from __future__ import annotations

import pytest

from kova import Message, RateLimited, TextDelta
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted
from kova.providers import ErrorEvent
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.testing import FakeBedrockServer, Reply, StreamReply, open_bedrock_server, reply_text

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
THROTTLED = ErrorEvent(message="Too many requests", error_type="throttlingException")
# No backoff: the retry decision is what is tested, and the fake runs on real sockets.
RETRY = RetryConfig(max_retries=2, initial_backoff=0.0)


def provider_for(server: FakeBedrockServer) -> BedrockProvider:
    return BedrockProvider(
        BedrockConfig(
            region="us-east-1", model_id=MODEL, endpoint_url=server.base_url, **server.credentials
        )
    )


async def test_throttling_before_content_is_retried() -> None:
    script: list[Reply] = [
        StreamReply(response=reply_text("x"), events=(THROTTLED,)),
        reply_text("Hello!"),
    ]
    async with open_bedrock_server(script) as server:
        provider = provider_for(server)
        async with AgentBuilder().provider(provider).retry_config(RETRY).build() as agent:
            async with agent.stream([Message.user("hi")]) as events:
                received = [event async for event in events]
    completed = received[-1]
    assert isinstance(completed, TurnCompleted)
    assert completed.response.text == "Hello!"
    assert len(server.converse_requests()) == 2


async def test_throttling_after_content_is_not_retried() -> None:
    events = (TextDelta(text="Hel"), THROTTLED)
    script: list[Reply] = [
        StreamReply(response=reply_text("x"), events=events),
        reply_text("never"),
    ]
    async with open_bedrock_server(script) as server:
        provider = provider_for(server)
        async with AgentBuilder().provider(provider).retry_config(RETRY).build() as agent:
            received: list[object] = []
            with pytest.raises(RateLimited) as caught:
                async with agent.stream([Message.user("hi")]) as stream:
                    async for event in stream:
                        received.append(event)
    assert caught.value.after_content
    assert TextDelta(text="Hel") in received
    assert len(server.converse_requests()) == 1
