"""Which models are asked for ``reasoning.encrypted_content``, the 400 fallback, and what
"the same model" is for sending reasoning back (issue 44, items 6 and 7).

Before, every ``store: false`` call asked for encrypted reasoning whatever the model, and a
non-reasoning model (gpt-4o, gpt-4.1-mini, gpt-5-chat-latest) answers that with a 400 on
every call; and reasoning went to any model sharing a prefix (gpt-5-mini's to gpt-5).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from kova import InferenceConfig, Message, ToolResult
from kova.errors import InvalidRequest
from kova.providers import ChatRequest
from kova.providers.openai._responses_models import reasons
from kova.testing import Script, open_responses_server, reply_text

from ..openai.conftest import collect
from .conftest import responses_provider
from .test_responses_client import TWO_CALLS, WEATHER
from .test_sdk_crosscheck import assert_same_body, sdk_client, sdk_stream_warnings

INCLUDE = ["reasoning.encrypted_content"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("o3", True),
        ("o3-mini", True),
        ("o4-mini-2025-04-16", True),
        ("gpt-5", True),
        ("gpt-5.4-mini", True),
        ("gpt-5-codex", True),
        ("gpt-oss-120b", True),
        ("gpt-4o", False),
        ("gpt-4o-mini-2024-07-18", False),
        ("gpt-4.1-mini", False),
        ("gpt-5-chat-latest", False),
        ("chatgpt-4o-latest", False),
        ("my-azure-deployment", None),
    ],
)
def test_the_table_of_known_models(model: str, expected: bool | None) -> None:
    assert reasons(model) is expected


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("model", "asked"),
    [("gpt-4o", False), ("gpt-4.1-mini", False), ("o4-mini", True), ("gpt-5-mini", True)],
)
async def test_only_reasoning_models_are_asked_for_encrypted_reasoning(
    model: str, asked: bool, stream: bool
) -> None:
    async with open_responses_server([reply_text("ok")]) as server:
        provider = responses_provider(server, model=model)
        async with provider.open():
            await _send(provider, ChatRequest.of("hi"), stream=stream)
    (request,) = server.responses_requests()
    body = request.json()
    assert body["store"] is False
    assert body.get("include") == (INCLUDE if asked else None)


async def test_the_config_overrides_the_table() -> None:
    async with open_responses_server([reply_text("a"), reply_text("b")]) as server:
        forced = responses_provider(server, model="gpt-4.1", encrypted_reasoning=False)
        never = responses_provider(server, model="o3", encrypted_reasoning=False)
        async with forced.open(), never.open():
            await forced.chat_completion(ChatRequest.of("hi"))
            await never.chat_completion(ChatRequest.of("hi"))
    assert [r.json().get("include") for r in server.responses_requests()] == [None, None]
    stored = responses_provider(server, model="o3", store=True)
    assert "include" not in stored.codec.encode(ChatRequest.of("hi"), stream=False).body  # type: ignore[operator]


async def _send(provider: Any, request: ChatRequest, *, stream: bool) -> str:
    if stream:
        async with provider.chat_completion_stream(request) as batches:
            folded = await collect(batches)
        return str(folded)
    return str((await provider.chat_completion(request)).text)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_refusal_is_retried_once_without_it_and_remembered(stream: bool) -> None:
    script = Script([reply_text("first"), reply_text("second")])
    async with open_responses_server(
        script, refuse_encrypted_reasoning=["my-deployment"]
    ) as server:
        provider = responses_provider(server, model="my-deployment")
        async with provider.open():
            assert "first" in await _send(provider, ChatRequest.of("hi"), stream=stream)
            assert "second" in await _send(provider, ChatRequest.of("again"), stream=stream)
    includes = [r.json().get("include") for r in server.responses_requests()]
    # Refused once, sent again without it; the next call does not ask any more.
    assert includes == [INCLUDE, None, None]


async def test_a_refusal_the_config_forced_is_not_retried() -> None:
    async with open_responses_server(
        [reply_text("never")], refuse_encrypted_reasoning=["my-deployment"]
    ) as server:
        provider = responses_provider(server, model="my-deployment", encrypted_reasoning=True)
        async with provider.open():
            with pytest.raises(InvalidRequest, match="Encrypted content is not supported"):
                await provider.chat_completion(ChatRequest.of("hi"))
    assert len(server.responses_requests()) == 1


@pytest.mark.parametrize(
    ("answered", "target", "kept"),
    [
        ("gpt-5-mini", "gpt-5", False),
        ("o3-mini", "o3", False),
        ("gpt-5", "gpt-5-mini", False),
        ("gpt-5.4", "gpt-5.4", True),
    ],
)
async def test_reasoning_goes_back_only_to_the_same_model(
    answered: str, target: str, kept: bool
) -> None:
    script = Script([TWO_CALLS, reply_text("ok")])
    async with open_responses_server(script) as server:
        provider = responses_provider(server, model=answered)
        async with provider.open():
            response = await provider.chat_completion(ChatRequest.of("go", tools=[WEATHER]))
            history = [
                Message.user("go"),
                Message.assistant(response.content),
                Message.tool_results(
                    [ToolResult(tool_use_id=c.id, content="x") for c in response.tool_uses]
                ),
            ]
            request = ChatRequest(
                messages=history, tools=[WEATHER], config=InferenceConfig(model=target)
            )
            await provider.chat_completion(request)
    items = server.responses_requests()[1].json()["input"]
    assert ("reasoning" in [item["type"] for item in items]) is kept


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("model", "reasoning"),
    [("o4-mini", True), ("gpt-4o", False)],
    ids=["reasoning-model", "non-reasoning-model"],
)
async def test_the_body_equals_what_the_official_sdk_sends(
    model: str, reasoning: bool, stream: bool
) -> None:
    """The settings a user of the official SDK passes for each kind of model: a reasoning
    model statelessly asks for its reasoning encrypted; a non-reasoning model cannot."""
    config: dict[str, Any] = {"model": model, "max_output_tokens": 256}
    sdk: dict[str, Any] = {
        "model": model,
        "instructions": "Be terse.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "max_output_tokens": 256,
        "store": False,
    }
    if reasoning:
        config |= {"reasoning_effort": "low", "reasoning_summary": "auto"}
        sdk |= {"reasoning": {"effort": "low", "summary": "auto"}, "include": INCLUDE}
    else:
        config |= {"temperature": 0.3}
        sdk |= {"temperature": 0.3}
    request = ChatRequest(messages=[Message.system("Be terse."), Message.user("hi")])
    async with open_responses_server([reply_text("a"), reply_text("b")]) as server:
        provider = responses_provider(server, **config)
        async with provider.open():
            await _send(provider, request, stream=stream)
        client = sdk_client(server)
        if stream:
            async with client.responses.stream(**sdk) as events:
                async for _event in events:
                    pass
        else:
            await client.responses.create(**sdk)
        await client.close()
    kova_request, sdk_request = server.responses_requests()
    assert_same_body(kova_request.json(), sdk_request.json())
    assert isinstance(openai.__version__, str)
