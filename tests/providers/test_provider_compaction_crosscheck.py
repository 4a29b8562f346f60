"""ProviderCompaction (issue 49): the providers' own server-side context management is sent
exactly as the official SDKs send it for the same settings (Anthropic's ``context_management``
edits with their beta headers, OpenAI Responses' ``context_management`` compaction), and
through an agent turn its trigger is the policy's; other providers never see it."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from kova import InferenceConfig, Message, Text, ToolResult, ToolUse
from kova.agent import AgentBuilder, ContextPolicy, ProviderCompaction, SlidingWindow
from kova.errors import BuildError
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import (
    Script,
    open_anthropic_server,
    open_openai_server,
    open_responses_server,
    reply_text,
)

HISTORY = [
    Message.user("read the logs"),
    Message.assistant([ToolUse(id="toolu_1", name="read", input={"path": "a.log"})]),
    Message.tool_results([ToolResult(tool_use_id="toolu_1", content="line 1\nline 2")]),
]
SDK_MESSAGES: list[Any] = [
    {"role": "user", "content": [{"type": "text", "text": "read the logs"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.log"}}
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "line 1\nline 2"}],
    },
]

# (kova's settings, the SDK's context_management, the SDK's betas)
ANTHROPIC_CASES = [
    (
        ProviderCompaction(trigger=30_000),
        {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 30_000},
                    "keep": {"type": "tool_uses", "value": 3},
                },
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 30_000}},
            ]
        },
        ["context-management-2025-06-27", "compact-2026-01-12"],
    ),
    (
        ProviderCompaction(
            summarize=False, keep_last=5, keep_tools=("memory", "todo"), trigger=100_000
        ),
        {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 100_000},
                    "keep": {"type": "tool_uses", "value": 5},
                    "exclude_tools": ["memory", "todo"],
                }
            ]
        },
        ["context-management-2025-06-27"],
    ),
    (
        ProviderCompaction(
            clear_tool_results=False, instructions="Keep file paths and ids.", trigger=150_000
        ),
        {
            "edits": [
                {
                    "type": "compact_20260112",
                    "trigger": {"type": "input_tokens", "value": 150_000},
                    "instructions": "Keep file paths and ids.",
                }
            ]
        },
        ["compact-2026-01-12"],
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("compaction", "sdk_context", "betas"), ANTHROPIC_CASES)
async def test_anthropic_context_management_is_the_sdks(compaction, sdk_context, betas, stream):
    script = Script([reply_text("ok")] * 2)
    async with open_anthropic_server(script, api_key="k") as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
        )
        request = ChatRequest(
            messages=HISTORY, config=InferenceConfig(max_tokens=1024), compaction=compaction
        )
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as events:
                    async for _ in events:
                        pass
            else:
                await provider.chat_completion(request)
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=server.base_url, max_retries=0
        ) as client:
            arguments: dict[str, Any] = {
                "model": "claude-opus-4-8",
                "max_tokens": 1024,
                "messages": SDK_MESSAGES,
                "betas": betas,
                "context_management": sdk_context,
                # kova's defaults for this model: adaptive thinking and the cache marker
                "thinking": {"type": "adaptive"},
                "cache_control": {"type": "ephemeral"},
            }
            if stream:
                async with client.beta.messages.stream(**arguments) as events:
                    async for _ in events:
                        pass
            else:
                await client.beta.messages.create(**arguments)
    kova_request, sdk_request = server.messages_requests()
    kova_body, sdk_body = kova_request.json(), sdk_request.json()
    assert kova_body == sdk_body
    assert kova_request.headers["anthropic-beta"] == sdk_request.headers["anthropic-beta"]


async def test_a_users_own_beta_header_is_kept_before_the_compaction_betas():
    async with open_anthropic_server(Script([reply_text("ok")])) as server:
        provider = AnthropicProvider(
            AnthropicConfig(
                model="claude-opus-4-8",
                api_key="k",
                base_url=server.base_url,
                extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
            )
        )
        async with provider.open():
            await provider.chat_completion(
                ChatRequest(messages=HISTORY, compaction=ProviderCompaction(trigger=9))
            )
    (sent,) = server.messages_requests()
    assert sent.headers["anthropic-beta"] == (
        "context-1m-2025-08-07,context-management-2025-06-27,compact-2026-01-12"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_responses_compaction_is_the_sdks(stream):
    script = Script([reply_text("ok")] * 2)
    async with open_responses_server(script) as server:
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="gpt-fake", base_url=server.base_url, api_key="k")
        )
        request = ChatRequest(
            messages=[Message.user("hi")], compaction=ProviderCompaction(trigger=200_000)
        )
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as events:
                    async for _ in events:
                        pass
            else:
                await provider.chat_completion(request)
        async with openai.AsyncOpenAI(
            base_url=server.base_url + "/v1", api_key="k", max_retries=0
        ) as client:
            params: dict[str, Any] = {
                "model": "gpt-fake",
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "hi"}],
                    }
                ],
                "store": False,
                "include": ["reasoning.encrypted_content"],
                "context_management": [{"type": "compaction", "compact_threshold": 200_000}],
            }
            if stream:
                params["stream"] = True
                async for _ in await client.responses.create(**params):
                    pass
            else:
                await client.responses.create(**params)
    kova_request, sdk_request = server.requests
    kova_body, sdk_body = kova_request.json(), sdk_request.json()
    assert kova_body["context_management"] == sdk_body["context_management"]
    assert kova_body == sdk_body


async def test_through_a_turn_the_trigger_is_three_quarters_of_the_policys_limit():
    async with open_anthropic_server(Script([reply_text("ok")])) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
        )
        builder = AgentBuilder().provider(provider)
        builder = builder.context(
            ProviderCompaction(summarize=False), SlidingWindow(), window=40_000, reserve=4_000
        )
        async with builder.build() as agent:
            await agent.run(HISTORY)
    (sent,) = server.messages_requests()
    (edit,) = sent.json()["context_management"]["edits"]
    assert edit["trigger"] == {"type": "input_tokens", "value": 27_000}
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"


async def test_a_provider_without_it_never_sees_it_and_the_next_strategy_works():
    async with open_openai_server(Script([reply_text("ok")])) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=server.base_url, api_key="k")
        )
        policy = ContextPolicy(ProviderCompaction(), SlidingWindow(), window=40_000)
        async with AgentBuilder().provider(provider).build() as agent:
            response = await agent.run(HISTORY, context=policy)
    assert response.text == "ok"
    (sent,) = server.requests
    assert "context_management" not in sent.json()
    assert not any(name.startswith("anthropic") for name in sent.headers)


def test_provider_compaction_alone_and_bad_settings_are_refused():
    with pytest.raises(BuildError, match="needs a strategy of kova's after it"):
        ContextPolicy(ProviderCompaction())
    with pytest.raises(BuildError, match="clear_tool_results or summarize"):
        ProviderCompaction(clear_tool_results=False, summarize=False)
    with pytest.raises(BuildError, match="trigger"):
        ProviderCompaction(trigger=0)
    with pytest.raises(BuildError, match="keep_tools"):
        ProviderCompaction(keep_tools=["a"])  # type: ignore[arg-type]


def test_a_temporal_workflow_keeps_its_place_in_the_policy():
    from kova.agent import Summarize
    from kova.temporal._payloads import policy_from_json, policy_to_json

    policy = ContextPolicy(ProviderCompaction(), Summarize(keep_last=2), window=9_000)
    back = policy_from_json(policy_to_json(policy, 8_000))
    assert [type(s) for s in back.strategies] == [ProviderCompaction, Summarize]
    assert back.strategies[1] == Summarize(keep_last=2)


# -- the server's compaction block, kept and sent back -------------------------------------

COMPACTION = {
    "type": "compaction",
    "content": "Summary: the user asked to read the logs; a.log had two lines, both fine.",
    "encrypted_content": "Eo8BCkYIBxgCKkBmeta==",
    "signature": "sig-abc==",
}


def _compacted_reply():
    from kova import StopReason
    from kova.providers import ModelResponse
    from kova.providers.anthropic._convert import compaction_text

    return ModelResponse(
        content=(
            compaction_text(COMPACTION),
            ToolUse(id="toolu_2", name="read", input={"path": "b.log"}),
        ),
        stop_reason=StopReason.TOOL_USE,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_a_compaction_block_goes_back_as_the_sdk_sends_it_and_replaces_the_past(stream):
    from kova.agent import ContextCompacted
    from kova.tools import tool

    @tool
    async def read(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        return f"{path}: fine"

    compacted = _compacted_reply()
    script = Script([compacted, reply_text("both fine"), compacted])
    async with open_anthropic_server(script) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
        )
        builder = AgentBuilder().provider(provider).tools(read)
        builder = builder.context(ProviderCompaction(), SlidingWindow(), window=40_000)
        events = []
        async with builder.build() as agent:
            if stream:
                async with agent.stream(HISTORY) as turn:
                    async for event in turn:
                        events.append(event)
                response = events[-1].response
                assert any(
                    isinstance(e, ContextCompacted) and e.strategy == "provider_compaction"
                    for e in events
                )
            else:
                response = await agent.run(HISTORY)
        # The SDK reads the same answer and sends its content back as it is.
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=server.base_url, max_retries=0
        ) as client:
            answer = await client.beta.messages.create(
                model="claude-opus-4-8", max_tokens=1024, messages=SDK_MESSAGES
            )
            sdk_assistant = {
                "role": "assistant",
                "content": [block.to_dict(exclude_none=True) for block in answer.content],
            }
    first, second, _sdk_first = server.messages_requests()
    assert response.text == "both fine"
    sent = second.json()["messages"]
    # What the compaction sums up is gone; the block leads the assistant turn, as the SDK's.
    assert sent[0] == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "[Earlier messages of this conversation were compacted by the provider.]",
            }
        ],
    }
    assert sent[1] == sdk_assistant
    assert sent[1]["content"][0] == COMPACTION
    assert second.messages[1] == response.new_messages[0]  # the fake read the block back
    assert len(sent) == 3  # the note, the compacted answer, its tool result
    assert response.compaction is not None
    assert response.compaction.strategy == "provider_compaction"
    assert response.compaction.removed == 3
    assert len(response.new_messages) == 3  # everything the turn produced is still there
    assert len(first.json()["messages"]) == 3


def test_a_responses_compaction_item_goes_back_before_what_followed_it():
    from openai.types.responses.response_compaction_item_param_param import (
        ResponseCompactionItemParamParam,
    )

    from kova.providers._sse import SseEvent
    from kova.providers.openai import OpenAiResponsesConfig as Config
    from kova.providers.openai._responses_convert import decode_response, encode_request
    from kova.providers.openai._responses_stream import ResponsesStreamDecoder

    item = {
        "id": "cmp_01",
        "type": "compaction",
        "encrypted_content": "gAAAAABcompacted==",
        "created_by": "system",
    }
    message = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "go on", "annotations": []}],
    }
    body = {"id": "resp_1", "model": "gpt-fake", "status": "completed", "output": [item, message]}
    endpoint = "http://127.0.0.1:1"
    whole = decode_response(body, endpoint=endpoint)
    decoder = ResponsesStreamDecoder(endpoint=endpoint)
    events = [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.output_item.added", "output_index": 1, "item": message},
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {"type": "response.completed", "response": body},
    ]
    streamed = decoder.feed([SseEvent(data=json.dumps(e), event=e["type"]) for e in events])
    metadata = [e.provider_metadata for e in streamed if getattr(e, "provider_metadata", None)]
    for kept in (whole.content[0].provider_metadata, metadata[0]):
        history = [
            Message.user("hi"),
            Message.assistant([Text(text="go on", provider_metadata=kept)]),
        ]
        sent = encode_request(
            history,
            (),
            InferenceConfig(),
            Config(model="gpt-fake", base_url=endpoint),
            stream=False,
        )["input"]
        back = {"type": "compaction", "id": "cmp_01", "encrypted_content": "gAAAAABcompacted=="}
        assert sent[1] == back  # in its place, before the message it came with
        assert set(back) <= set(ResponseCompactionItemParamParam.__annotations__)
        assert sent[2]["id"] == "msg_01"
