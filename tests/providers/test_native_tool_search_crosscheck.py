"""The providers' own tool search (``AgentBuilder().tool_search(provider_native=True)``, issue
51): requests equal the official SDKs' for the same tools and history (Anthropic's tool search
tool with ``defer_loading``, OpenAI Responses' hosted ``tool_search``), the search's blocks and
items an answer holds go back in their place, streamed or not, and other providers are refused
at build time, by name."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from kova import InferenceConfig, Message, ToolDefinition, ToolResult
from kova.agent import AgentBuilder, Turn
from kova.agent._accumulate import ResponseAccumulator
from kova.errors import BuildError
from kova.providers import ChatRequest
from kova.providers._sse import SseEvent
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.anthropic._convert import decode_response as anthropic_decode
from kova.providers.anthropic._convert import encode_messages
from kova.providers.anthropic._stream import AnthropicStreamDecoder
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.providers.openai._responses_convert import decode_response as responses_decode
from kova.providers.openai._responses_stream import ResponsesStreamDecoder
from kova.testing import (
    Script,
    ScriptedProvider,
    open_anthropic_server,
    open_responses_server,
    reply_text,
)
from kova.tools import tool

UPFRONT = ToolDefinition(
    name="get_time",
    description="The local time in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather forecast for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
MAIL = ToolDefinition(
    name="send_email",
    description="Send an email message.",
    parameters={"type": "object", "properties": {"to": {"type": "string"}}},
)

# -- Anthropic ------------------------------------------------------------------------------

SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "tool_search_tool_bm25",
    "input": {"query": "weather forecast"},
}
SEARCH_RESULT = {
    "type": "tool_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
    },
}
CALL = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}}
ANSWER = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-8",
    "content": [{"type": "text", "text": "Let me look."}, SEARCH_USE, SEARCH_RESULT, CALL],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def _sse(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(event["type"], json.dumps(event)) for event in events]


STREAMED = _sse(
    [
        {"type": "message_start", "message": {**ANSWER, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Let me look."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**SEARCH_USE, "input": {}}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "weather'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ' forecast"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": SEARCH_RESULT},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {**CALL, "input": {}}},
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 3},
        {
            "type": "message_delta",
            "delta": {"type": "message_delta", "stop_reason": "tool_use"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
)


def _history(answer: Message) -> list[Message]:
    return [
        Message.user("weather in Oslo?"),
        answer,
        Message.tool_results([ToolResult(tool_use_id="toolu_01", content="sunny")]),
    ]


def _anthropic_streamed_answer() -> Message:
    decoder = AnthropicStreamDecoder()
    accumulator = ResponseAccumulator()
    for event, data in STREAMED:
        accumulator.feed(decoder.feed_event(event, data))
    decoder.check_complete()
    return Message.assistant(accumulator.finish().content)


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
async def test_anthropic_request_with_deferred_tools_and_a_search_is_the_sdks(streamed):
    answer = (
        _anthropic_streamed_answer()
        if streamed
        else Message.assistant(anthropic_decode(ANSWER).content)
    )
    async with open_anthropic_server(Script([reply_text("ok")] * 2), api_key="k") as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
        )
        request = ChatRequest(
            messages=_history(answer),
            tools=[UPFRONT],
            deferred_tools=[WEATHER, MAIL],
            config=InferenceConfig(max_tokens=1024),
        )
        async with provider.open():
            await provider.chat_completion(request)
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=server.base_url, max_retries=0
        ) as client:
            await client.messages.create(
                model="claude-opus-4-8",
                max_tokens=1024,
                messages=[
                    {"role": "user", "content": [{"type": "text", "text": "weather in Oslo?"}]},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Let me look."},
                            SEARCH_USE,  # type: ignore[list-item]
                            SEARCH_RESULT,  # type: ignore[list-item]
                            CALL,  # type: ignore[list-item]
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"}
                        ],
                    },
                ],
                tools=[
                    {
                        "name": "get_time",
                        "description": UPFRONT.description,
                        "input_schema": UPFRONT.parameters,  # type: ignore[typeddict-item]
                    },
                    {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
                    {
                        "name": "get_weather",
                        "description": WEATHER.description,
                        "input_schema": WEATHER.parameters,  # type: ignore[typeddict-item]
                        "defer_loading": True,
                    },
                    {
                        "name": "send_email",
                        "description": MAIL.description,
                        "input_schema": MAIL.parameters,  # type: ignore[typeddict-item]
                        "defer_loading": True,
                    },
                ],
                # kova's defaults for this model: adaptive thinking and the cache marker
                thinking={"type": "adaptive"},
                cache_control={"type": "ephemeral"},
            )
    kova_request, sdk_request = server.messages_requests()
    assert kova_request.json() == sdk_request.json()
    # The tool search tool is generally available: no beta header, from either.
    assert "anthropic-beta" not in kova_request.headers
    assert "anthropic-beta" not in sdk_request.headers


def test_a_streamed_search_goes_back_like_the_whole_answer():
    whole = encode_messages([Message.assistant(anthropic_decode(ANSWER).content)])
    streamed = encode_messages([_anthropic_streamed_answer()])
    assert whole == streamed
    assert whole[1][0]["content"] == ANSWER["content"]  # type: ignore[index]


def test_other_providers_drop_the_search_blocks():
    # An empty text carries them: another provider's history has nothing to send for it.
    message = Message.assistant(anthropic_decode(ANSWER).content)
    assert message.text == "Let me look."
    assert [use.name for use in message.tool_uses] == ["get_weather"]
    assert Message.from_dict(message.to_dict()) == message


# -- OpenAI Responses -----------------------------------------------------------------------

SEARCH_CALL = {
    "type": "tool_search_call",
    "id": "tsc_01",
    "call_id": None,
    "execution": "server",
    "status": "completed",
    "arguments": {"query": "weather forecast"},
}
SEARCH_OUTPUT = {
    "type": "tool_search_output",
    "id": "tso_01",
    "call_id": None,
    "execution": "server",
    "status": "completed",
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": WEATHER.description,
            "parameters": WEATHER.parameters,
            "strict": False,
            "defer_loading": True,
        }
    ],
}
FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_01",
    "call_id": "call_01",
    "name": "get_weather",
    "arguments": '{"city": "Oslo"}',
    "status": "completed",
}


def _responses_answer(base_url: str) -> Message:
    body = {
        "id": "resp_01",
        "object": "response",
        "model": "gpt-fake",
        "status": "completed",
        "output": [SEARCH_CALL, SEARCH_OUTPUT, FUNCTION_CALL],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }
    return Message.assistant(responses_decode(body, endpoint=base_url).content)


def test_a_streamed_responses_search_goes_back_like_the_whole_answer():
    body = {
        "id": "resp_01",
        "object": "response",
        "model": "gpt-fake",
        "status": "completed",
        "output": [SEARCH_CALL, SEARCH_OUTPUT, FUNCTION_CALL],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**body, "output": [], "status": "in_progress"}}
    ]
    for index, item in enumerate(body["output"]):  # type: ignore[arg-type]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": body})
    decoder = ResponsesStreamDecoder(endpoint="http://x")
    accumulator = ResponseAccumulator()
    accumulator.feed(decoder.feed([SseEvent(json.dumps(event), event["type"]) for event in events]))
    decoder.finish()
    assert decoder.error is None
    streamed = accumulator.finish().content
    whole = responses_decode(body, endpoint="http://x").content
    assert [b.provider_metadata for b in streamed] == [b.provider_metadata for b in whole]
    (call,) = whole
    kept = call.provider_metadata["openai_responses"]["reasoning"]  # type: ignore[index]
    assert kept == [_without_nulls(SEARCH_CALL), _without_nulls(SEARCH_OUTPUT)]


def _without_nulls(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if value is not None}


async def test_responses_request_with_deferred_tools_and_a_search_is_the_sdks():
    async with open_responses_server(Script([reply_text("ok")] * 2)) as server:
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="gpt-fake", base_url=server.base_url, api_key="k")
        )
        messages = [
            Message.user("weather in Oslo?"),
            _responses_answer(server.base_url),
            Message.tool_results([ToolResult(tool_use_id="call_01", content="sunny")]),
        ]
        request = ChatRequest(messages=messages, tools=[UPFRONT], deferred_tools=[WEATHER, MAIL])
        async with provider.open():
            await provider.chat_completion(request)
        async with openai.AsyncOpenAI(
            base_url=server.base_url + "/v1", api_key="k", max_retries=0
        ) as client:
            await client.responses.create(
                model="gpt-fake",
                input=[
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "weather in Oslo?"}],
                    },
                    _without_nulls(SEARCH_CALL),  # type: ignore[list-item]
                    _without_nulls(SEARCH_OUTPUT),  # type: ignore[list-item]
                    {
                        "type": "function_call",
                        "id": "fc_01",
                        "call_id": "call_01",
                        "name": "get_weather",
                        "arguments": '{"city": "Oslo"}',
                    },
                    {"type": "function_call_output", "call_id": "call_01", "output": "sunny"},
                ],
                tools=[
                    {
                        "type": "function",
                        "name": "get_time",
                        "description": UPFRONT.description,
                        "parameters": UPFRONT.parameters,
                        "strict": False,
                    },
                    {"type": "tool_search"},
                    {
                        "type": "function",
                        "name": "get_weather",
                        "description": WEATHER.description,
                        "parameters": WEATHER.parameters,
                        "strict": False,
                        "defer_loading": True,
                    },
                    {
                        "type": "function",
                        "name": "send_email",
                        "description": MAIL.description,
                        "parameters": MAIL.parameters,
                        "strict": False,
                        "defer_loading": True,
                    },
                ],
                store=False,
                include=["reasoning.encrypted_content"],
            )
    kova_request, sdk_request = server.requests
    assert kova_request.json() == sdk_request.json()


# -- through an agent -----------------------------------------------------------------------


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return "noon"


@tool(defer=True)
def get_weather(city: str) -> str:
    """The weather forecast for a city."""
    return "sunny"


async def test_an_agent_sends_its_deferred_tools_for_the_providers_search():
    async with open_anthropic_server(Script([reply_text("ok")])) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
        )
        agent = (
            AgentBuilder()
            .provider(provider)
            .tools(get_time, get_weather)
            .tool_search(provider_native=True)
            .build()
        )
        async with agent:
            await agent.run("weather?")
    (sent,) = server.messages_requests()
    tools = sent.json()["tools"]
    assert [t.get("name") for t in tools] == ["get_time", "tool_search_tool_bm25", "get_weather"]
    assert tools[2]["defer_loading"] is True
    assert all("defer_loading" not in t for t in tools[:2])


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        (OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="k")), "openai"),
        (ScriptedProvider([]), "scripted"),
    ],
)
def test_a_provider_without_its_own_search_is_refused_by_name(provider, name):
    builder = AgentBuilder().provider(provider).tools(get_weather).tool_search(provider_native=True)
    with pytest.raises(BuildError, match=f"the '{name}' provider has no tool search of its own"):
        builder.build()


def test_provider_native_must_be_a_bool():
    with pytest.raises(BuildError, match="must be a bool"):
        AgentBuilder().tool_search(provider_native="yes")  # type: ignore[arg-type]


def test_a_saved_turn_keeps_the_providers_search():
    turn = Turn.start(
        [Message.user("hi")], tools=[UPFRONT], deferred=[WEATHER], config=InferenceConfig()
    )
    turn.set_tools([UPFRONT], native_search=True)
    step = turn.next_step()
    assert step.request.tools == (UPFRONT,)  # type: ignore[union-attr]
    assert step.request.deferred_tools == (WEATHER,)  # type: ignore[union-attr]
    again = Turn.from_json(turn.to_json())
    assert again.next_step().request.deferred_tools == (WEATHER,)  # type: ignore[union-attr]
