"""Cross-checks with the official ``openai`` package (a dev dependency), both on the fake
Responses server: kova sends the request body the SDK's ``client.responses.create`` sends for
the same request, and the SDK (``responses.create`` and ``responses.stream``) reads the fake
server's answers to the same text, calls, reasoning and usage as kova, so the fake is faithful.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import openai
import pytest

from kova import (
    Document,
    File,
    Image,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    TextDelta,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ErrorEvent
from kova.testing import (
    ErrorReply,
    FakeResponsesServer,
    Script,
    StreamReply,
    open_responses_server,
    reply_text,
    reply_tool_calls,
)

from ..openai.conftest import Folded, collect, fold
from .conftest import responses_provider

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
KOVA_TOOLS = [
    ToolDefinition(name="get_weather", description="Current weather", parameters=WEATHER_PARAMETERS)
]
SDK_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather",
        "parameters": WEATHER_PARAMETERS,
        "strict": True,
    }
]
STATELESS: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"]}

# The SDK stops reading at the terminal event without closing its own async generators, which
# trio reports as ResourceWarnings when they are collected: the SDK's business, not the fake's.
sdk_stream_warnings = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
)


def sdk_client(server: FakeResponsesServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0)


def assert_same_body(kova_body: Any, sdk_body: Any) -> None:
    for key in sorted(set(kova_body) & set(sdk_body)):
        assert kova_body[key] == sdk_body[key], f"{key} differs"
    assert set(kova_body) == set(sdk_body)


async def _kova_send(server: FakeResponsesServer, request: ChatRequest, *, stream: bool) -> None:
    provider = responses_provider(server, reasoning_effort="low", reasoning_summary="auto")
    async with provider.open():
        if stream:
            async with provider.chat_completion_stream(request) as batches:
                await collect(batches)
        else:
            await provider.chat_completion(request)


async def _sdk_send(client: openai.AsyncOpenAI, params: dict[str, Any], *, stream: bool) -> None:
    if stream:
        async with client.responses.stream(**params) as events:
            async for _event in events:
                pass
    else:
        await client.responses.create(**params)


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_text_images_tools_structured_output_and_settings(stream: bool) -> None:
    history = [
        Message.system("You are terse."),
        Message.user([Text(text="What's here?"), Image(media_type="image/png", data="iVBORw0K")]),
        Message.assistant("A cat."),
        Message.user([Text(text="And here?"), Image(url="https://example.com/dog.jpg")]),
    ]
    config = InferenceConfig(
        model="gpt-5.4",
        max_tokens=256,
        temperature=0.2,
        top_p=0.9,
        response_format=ResponseFormat.named("answer", SCHEMA),
    )
    sdk_params: dict[str, Any] = {
        "model": "gpt-5.4",
        "instructions": "You are terse.",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What's here?"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K",
                 "detail": "auto"},
            ]},
            {"type": "message", "role": "assistant", "content": "A cat."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "And here?"},
                {"type": "input_image", "image_url": "https://example.com/dog.jpg",
                 "detail": "auto"},
            ]},
        ],
        "tools": SDK_TOOLS,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA,
                            "strict": True}},
        "max_output_tokens": 256,
        "temperature": 0.2,
        "top_p": 0.9,
        **STATELESS,
    }  # fmt: skip
    reply = reply_text('{"answer":"a dog"}')
    async with open_responses_server([reply, reply]) as server:
        await _kova_send(
            server, ChatRequest(messages=history, tools=KOVA_TOOLS, config=config), stream=stream
        )
        async with sdk_client(server) as client:
            await _sdk_send(client, sdk_params, stream=stream)
    kova_request, sdk_request = server.requests
    assert (kova_request.method, kova_request.path) == (sdk_request.method, sdk_request.path)
    assert_same_body(kova_request.json(), sdk_request.json())
    assert kova_request.headers["authorization"] == sdk_request.headers["authorization"]
    # Both sides read the same history back from the wire.
    assert server.script.requests[0].messages == server.script.requests[1].messages


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tool_round_trip_with_parallel_calls_and_reasoning(stream: bool) -> None:
    """Both clients get the same first answer (reasoning, two calls) from the fake, and send
    the same second request: the reasoning item unchanged, then the calls, then the outputs."""
    first = StreamReply(
        response=reply_tool_calls(
            ToolUse(id="call_paris", name="get_weather", input={"city": "Paris"}),
            ToolUse(id="call_oslo", name="get_weather", input={"city": "Oslo"}),
            thinking="Need the weather for both.",
        )
    )
    script = Script([first, reply_text("Paris."), first, reply_text("Paris.")])
    async with open_responses_server(script) as server:
        # kova: the first call, then the loop's second call from its own history.
        provider = responses_provider(server, reasoning_effort="low", reasoning_summary="auto")
        question = Message.user("Paris and Oslo?")
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(
                    ChatRequest(messages=[question], tools=KOVA_TOOLS)
                ) as batches:
                    events = await collect(batches)
                from kova.agent._accumulate import ResponseAccumulator

                accumulator = ResponseAccumulator()
                accumulator.feed(events)
                answer = accumulator.finish()
            else:
                answer = await provider.chat_completion(
                    ChatRequest(messages=[question], tools=KOVA_TOOLS)
                )
            history = [
                question,
                Message.assistant(answer.content),
                Message.tool_results(
                    [
                        ToolResult(tool_use_id=call.id, content=f"{call.input['city']}: 18°C")
                        for call in answer.tool_uses
                    ]
                ),
            ]
            await provider.chat_completion(ChatRequest(messages=history, tools=KOVA_TOOLS))
        # The SDK: the same first call, then the second built from its parsed output.
        base: dict[str, Any] = {
            "model": "gpt-fake",
            "tools": SDK_TOOLS,
            "reasoning": {"effort": "low", "summary": "auto"},
            **STATELESS,
        }
        user = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Paris and Oslo?"}],
        }
        async with sdk_client(server) as client:
            if stream:
                async with client.responses.stream(**base, input=[user]) as sdk_events:
                    response = await sdk_events.get_final_response()
            else:
                response = await client.responses.create(**base, input=[user])
            replay: list[Any] = [user]
            outputs: list[Any] = []
            for item in response.output:
                if item.type == "reasoning":
                    replay.append(
                        {
                            "type": "reasoning",
                            "id": item.id,
                            "summary": [part.model_dump() for part in item.summary],
                            "encrypted_content": item.encrypted_content,
                        }
                    )
                elif item.type == "function_call":
                    replay.append(
                        {
                            "type": "function_call",
                            "id": item.id,
                            "call_id": item.call_id,
                            "name": item.name,
                            "arguments": item.arguments,
                        }
                    )
                    city = json.loads(item.arguments)["city"]
                    outputs.append(
                        {
                            "type": "function_call_output",
                            "call_id": item.call_id,
                            "output": f"{city}: 18°C",
                        }
                    )
            await client.responses.create(**base, input=replay + outputs)
    kova_first, kova_second, sdk_first, sdk_second = server.responses_requests()
    assert_same_body(
        kova_first.json(), {**sdk_first.json(), "stream": True} if stream else sdk_first.json()
    )
    kova_body, sdk_body = kova_second.json(), sdk_second.json()
    # Each first answer had its own item ids; the shapes are otherwise equal.
    kova_items, sdk_items = kova_body.pop("input"), sdk_body.pop("input")
    assert_same_body(kova_body, sdk_body)
    assert [set(item) for item in kova_items] == [set(item) for item in sdk_items]
    assert [item["type"] for item in kova_items] == [
        "message", "reasoning", "function_call", "function_call",
        "function_call_output", "function_call_output",
    ]  # fmt: skip
    for kova_item, sdk_item in zip(kova_items, sdk_items, strict=True):
        for key in kova_item:
            if key not in ("id", "encrypted_content"):
                assert kova_item[key] == sdk_item[key], key


async def test_count_tokens_sends_what_the_sdk_input_tokens_sends() -> None:
    async with open_responses_server([]) as server:
        provider = responses_provider(server, reasoning_effort="low")
        request = ChatRequest(
            messages=[Message.system("Be brief."), Message.user("Count me.")],
            tools=KOVA_TOOLS,
            config=InferenceConfig(response_format=ResponseFormat.named("answer", SCHEMA)),
        )
        async with provider.open():
            count = await provider.count_tokens(request)
        async with sdk_client(server) as client:
            sdk_count = await client.responses.input_tokens.count(
                model="gpt-fake",
                instructions="Be brief.",
                input=[
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Count me."}],
                    }
                ],
                tools=SDK_TOOLS,
                reasoning={"effort": "low"},
                text={
                    "format": {"type": "json_schema", "name": "answer", "schema": SCHEMA,
                               "strict": True}
                },
            )  # fmt: skip
    kova_request, sdk_request = server.requests
    assert kova_request.path == sdk_request.path
    assert_same_body(kova_request.json(), sdk_request.json())
    assert count == sdk_count.input_tokens


REPLIES = {
    "text": reply_text(
        "Bonjour, ça va? 🌍 " * 3,
        usage=Usage(input_tokens=30, output_tokens=9, cache_read_tokens=16, reasoning_tokens=4),
    ),
    # Ids of their own: a script renumbers the call_N ids of a reply it serves again.
    "tool_calls": reply_tool_calls(
        ToolUse(id="call_paris", name="get_weather", input={"city": "Paris"}),
        ToolUse(id="call_oslo", name="get_time", input={"zone": "Europe/Oslo", "24h": True}),
        text="Checking both.",
    ),
    "reasoning": attrs.evolve(
        reply_tool_calls(ToolUse(id="call_paris", name="get_weather", input={"city": "Paris"})),
        thinking="Six times seven.",
    ),
    "max_tokens": attrs.evolve(reply_text("cut sho"), stop_reason=StopReason.MAX_TOKENS),
    "structured": reply_text('{"answer":"42"}'),
}


def _sdk_fold(response: Any) -> Folded:
    text = "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )
    thinking = "\n\n".join(
        part.text for item in response.output if item.type == "reasoning" for part in item.summary
    )
    calls = tuple(
        (item.call_id, item.name, json.loads(item.arguments))
        for item in response.output
        if item.type == "function_call"
    )
    if response.status == "incomplete":
        assert response.incomplete_details is not None
        stop = (
            StopReason.MAX_TOKENS
            if response.incomplete_details.reason == "max_output_tokens"
            else StopReason.unknown(str(response.incomplete_details.reason))
        )
    else:
        stop = StopReason.TOOL_USE if calls else StopReason.END_TURN
    usage = response.usage
    return Folded(
        text=text,
        thinking=thinking,
        tool_calls=calls,
        stop=stop,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            cache_read_tokens=usage.input_tokens_details.cached_tokens,
            reasoning_tokens=usage.output_tokens_details.reasoning_tokens,
        )
        if usage is not None
        else None,
    )


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("name", sorted(REPLIES))
async def test_the_official_sdk_reads_what_kova_reads(name: str, stream: bool) -> None:
    reply = StreamReply(response=REPLIES[name], chunk_chars=3)
    async with open_responses_server(Script([reply, reply])) as server:
        provider = responses_provider(server)
        request = ChatRequest(messages=[Message.user("hi")])
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    kova = fold(await collect(batches))
            else:
                response = await provider.chat_completion(request)
                kova = Folded(
                    text=response.text,
                    thinking=response.thinking or "",
                    tool_calls=tuple((c.id, c.name, dict(c.input)) for c in response.tool_uses),
                    stop=response.stop_reason,
                    usage=response.usage,
                )
        async with sdk_client(server) as client:
            params: dict[str, Any] = {"model": "gpt-fake", "input": "hi", **STATELESS}
            if stream:
                deltas: list[str] = []
                final: Any = None
                async with client.responses.stream(**params) as events:
                    async for event in events:
                        if event.type == "response.output_text.delta":
                            deltas.append(event.delta)
                        elif event.type in ("response.completed", "response.incomplete"):
                            # (get_final_response() knows only response.completed.)
                            final = event.response
                sdk = _sdk_fold(final)
                assert "".join(deltas) == sdk.text
            else:
                sdk = _sdk_fold(await client.responses.create(**params))
    assert sdk == kova
    expected = REPLIES[name]
    assert kova.text == expected.text
    assert kova.stop == expected.stop_reason
    assert kova.usage == expected.usage
    assert kova.tool_calls == tuple((c.id, c.name, dict(c.input)) for c in expected.tool_uses)


async def test_the_official_sdk_sees_the_error_status_body_and_retry_after() -> None:
    script = Script([ErrorReply(status_code=429, message="Rate limit reached", retry_after=7)])
    async with open_responses_server(script) as server, sdk_client(server) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.responses.create(model="gpt-fake", input="hi")
    assert info.value.status_code == 429
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.response.headers["retry-after"] == "7"


@sdk_stream_warnings
async def test_the_official_sdk_raises_on_the_nested_error_event_kova_classifies() -> None:
    events = (
        TextDelta(text="Par"),
        ErrorEvent(message="Slow down", error_type="rate_limit_exceeded"),
    )
    reply = StreamReply(response=reply_text(""), events=events)
    async with open_responses_server([reply]) as server, sdk_client(server) as client:
        with pytest.raises(openai.APIError, match="Slow down") as info:
            async with client.responses.stream(model="gpt-fake", input="hi") as stream:
                async for _event in stream:
                    pass
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "rate_limit_exceeded"


PDF64 = "JVBERi0xLjcKMSAwIG9iaiA8PD4+IGVuZG9iagp0cmFpbGVyIDw8Pj4KJSVFT0YK"


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_documents_and_files_go_as_input_file_parts(stream: bool) -> None:
    history = [
        Message.user(
            [
                Text(text="Compare them."),
                Document(data=PDF64, title="Invoice 7"),
                Document(url="https://example.com/letter.pdf"),
                Document(file_id="file-abc"),
                File("file-def"),
                File("file-img", media_type="image/png"),
            ]
        )
    ]
    sdk_params: dict[str, Any] = {
        "model": "gpt-5.4",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Compare them."},
                {"type": "input_file", "filename": "Invoice 7.pdf",
                 "file_data": f"data:application/pdf;base64,{PDF64}"},
                {"type": "input_file", "file_url": "https://example.com/letter.pdf"},
                {"type": "input_file", "file_id": "file-abc"},
                {"type": "input_file", "file_id": "file-def"},
                {"type": "input_image", "file_id": "file-img", "detail": "auto"},
            ]},
        ],
        "reasoning": {"effort": "low", "summary": "auto"},
        "max_output_tokens": 64,
        **STATELESS,
    }  # fmt: skip
    reply = reply_text("ok")
    async with open_responses_server([reply, reply]) as server:
        request = ChatRequest(
            messages=history, config=InferenceConfig(model="gpt-5.4", max_tokens=64)
        )
        await _kova_send(server, request, stream=stream)
        async with sdk_client(server) as client:
            await _sdk_send(client, sdk_params, stream=stream)
    kova_request, sdk_request = server.requests
    assert_same_body(kova_request.json(), sdk_request.json())
    assert server.script.requests[0].messages == server.script.requests[1].messages
