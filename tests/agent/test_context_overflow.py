"""A provider's context-overflow answer: one error class for every provider, and with a
context policy one compaction and one retry of the call (issue 49)."""

from __future__ import annotations

import pytest
from _fake_formats import FORMATS, chat_requests

from kova import ContextOverflow, InferenceConfig, InvalidRequest, Message, ToolResult, ToolUse
from kova.agent import AgentBuilder, ClearToolResults, ContextCompacted, ContextPolicy, Summarize
from kova.providers._classify import is_context_overflow, provider_error
from kova.testing import ErrorReply, Script, reply_text

# What each provider answers for a prompt over its window (status, type or code, message).
OVERFLOWS = {
    "anthropic": (
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
    ),
    "openai": (
        400,
        "invalid_request_error",
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130415 tokens. Please reduce the length of the messages.",
    ),
    "azure": (
        400,
        "invalid_request_error",
        "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9001 tokens. Please reduce the length of the messages.",
    ),
    "responses": (
        400,
        "context_length_exceeded",
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again.",
    ),
    "bedrock": (400, "ValidationException", "Input is too long for requested model."),
    "gemini": (
        400,
        "INVALID_ARGUMENT",
        "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).",
    ),
    "ollama": (400, None, "the input length exceeds the context length"),
}


@pytest.mark.parametrize(
    ("message", "kinds", "overflow"),
    [
        *[(message, (kind,), True) for _, kind, message in OVERFLOWS.values()],
        ("input length and `max_tokens` exceed context limit: 197779 + 4096 > 200000", (), True),
        ("bad request", ("context_length_exceeded",), True),
        ("The model returned the following errors: too many input tokens", (), True),
        ("max_tokens: must be at most 8192", ("invalid_request_error",), False),
        ("messages: roles must alternate", ("ValidationException",), False),
        ("Unsupported parameter: 'context_management'", (), False),
    ],
)
def test_every_providers_overflow_words_are_one_class(message, kinds, overflow):
    assert is_context_overflow(message, *kinds) is overflow
    error = provider_error(
        message, provider="p", status_code=400, error_type=kinds[0] if kinds else None
    )
    assert isinstance(error, InvalidRequest)  # still caught as before
    assert isinstance(error, ContextOverflow) is overflow
    # A rate limit that talks about the window is still a rate limit.
    assert not isinstance(provider_error(message, provider="p", status_code=429), ContextOverflow)


def _history() -> list[Message]:
    messages = [Message.user("read them all")]
    for step in range(4):
        call = ToolUse(id=f"c{step}", name="read", input={"n": step})
        messages.append(Message.assistant([call]))
        messages.append(Message.tool_results([ToolResult(tool_use_id=call.id, content="y" * 3000)]))
    return messages


def _overflow(fmt_name: str) -> ErrorReply:
    status, kind, message = OVERFLOWS[fmt_name]
    return ErrorReply(status_code=status, message=message, error_type=kind)


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_an_overflow_is_compacted_once_and_the_call_sent_again(fmt, streamed):
    script = Script([_overflow(fmt.name), reply_text("done")])
    async with fmt.open_server(script) as server:
        builder = AgentBuilder().provider(fmt.build(server))
        # The window is large: only the provider knows the prompt is over it.
        builder = builder.context(ClearToolResults(keep_last=1), window=1_000_000)
        async with builder.build() as agent:
            if streamed:
                events = []
                async with agent.stream(_history()) as stream:
                    async for event in stream:
                        events.append(event)
                response = events[-1].response
                assert any(isinstance(e, ContextCompacted) for e in events)
            else:
                response = await agent.run(_history())
    assert response.text == "done"
    sent = chat_requests(server)
    assert len(sent) == 2
    first, second = (r.decoded.messages for r in sent)
    assert len(first) == len(second)  # the same messages, with older results cleared
    cleared = [b.text for m in second for b in m.content if isinstance(b, ToolResult)]
    assert sum(t.startswith("[tool result cleared") for t in cleared) == 3
    assert cleared[-1] == "y" * 3000
    assert response.compaction is not None
    assert response.compaction.strategy == "clear_tool_results"


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
async def test_without_a_policy_an_overflow_is_a_clear_error_and_one_request(fmt):
    async with fmt.open_server(Script([_overflow(fmt.name)])) as server:
        async with AgentBuilder().provider(fmt.build(server)).build() as agent:
            with pytest.raises(ContextOverflow, match=r"(?i)too long|context|exceeds"):
                await agent.run(_history())
    assert len(chat_requests(server)) == 1


async def test_a_second_overflow_of_the_same_call_fails_the_turn():
    fmt = next(f for f in FORMATS if f.name == "anthropic")
    script = Script([_overflow("anthropic"), _overflow("anthropic"), reply_text("never")])
    async with fmt.open_server(script) as server:
        builder = AgentBuilder().provider(fmt.build(server))
        builder = builder.context(ClearToolResults(keep_last=1), window=1_000_000)
        async with builder.build() as agent:
            with pytest.raises(ContextOverflow, match="prompt is too long"):
                await agent.run(_history())
    assert len(chat_requests(server)) == 2  # one retry, never a third


async def test_an_overflow_nothing_can_compact_is_the_providers_error():
    fmt = next(f for f in FORMATS if f.name == "openai")
    async with fmt.open_server(Script([_overflow("openai"), reply_text("never")])) as server:
        builder = AgentBuilder().provider(fmt.build(server))
        builder = builder.context(ClearToolResults(keep_last=1), window=1_000_000)
        async with builder.build() as agent:
            with pytest.raises(ContextOverflow, match="maximum context length"):
                await agent.run([Message.user("hi")])  # no tool result to clear
    assert len(chat_requests(server)) == 1


async def test_an_overflow_with_a_summary_policy_summarizes_then_retries():
    fmt = next(f for f in FORMATS if f.name == "gemini")

    def model(request):
        text = request.messages[-1].text
        if "<conversation>" in text:
            return reply_text("SUMMARY")
        if any("SUMMARY" in m.text for m in request.messages):
            return reply_text("done")
        return _overflow("gemini")

    async with fmt.open_server(Script(model)) as server:
        builder = AgentBuilder().provider(fmt.build(server))
        builder = builder.context(Summarize(keep_last=2), window=1_000_000)
        async with builder.build() as agent:
            response = await agent.run(_history())
    assert response.text == "done"
    assert len(chat_requests(server)) == 3  # refused, the summary, the retry
    assert response.compaction is not None
    assert response.compaction.strategy == "summarize"
    assert ContextPolicy(Summarize(keep_last=2), window=1_000_000) is not None


def test_a_saved_turn_keeps_its_compacted_history_and_sends_the_same_next_request():
    from kova.agent import SlidingWindow, Turn
    from kova.agent._context import Compact
    from kova.agent._turn import CallModel

    history = _history()
    policy = ContextPolicy(Summarize(keep_last=2), SlidingWindow(), window=3_000, reserve=100)
    turn = Turn.start(history, tools=(), config=InferenceConfig(model="m"))
    turn.set_context(policy, model="m")
    assert isinstance(turn.next_step(), Compact)
    turn.compacted(reply_text("SUMMARY of parts 0-2"))
    restored = Turn.from_json(turn.to_json())
    restored.set_context(policy, model="m")
    step, again = turn.next_step(), restored.next_step()
    assert isinstance(step, CallModel)
    assert isinstance(again, CallModel)
    assert again.request.messages == step.request.messages
    assert "SUMMARY of parts 0-2" in again.request.messages[0].text
    assert restored.compaction == turn.compaction


async def test_near_the_window_the_providers_exact_count_decides():
    from kova.providers import heuristic_count_tokens
    from kova.testing import open_anthropic_server

    history = _history()
    estimate = heuristic_count_tokens(history)
    window = int(estimate / 0.85 / 0.9)  # the estimate is 85% of the limit: near it
    counted = []

    def count(messages, tools):  # the provider's tokenizer counts twice the heuristic
        counted.append(len(messages))
        return 2 * heuristic_count_tokens(messages, tools)

    script = Script([reply_text("done")] * 2)
    async with open_anthropic_server(script, count_tokens=count) as server:
        provider = next(f for f in FORMATS if f.name == "anthropic").build(server)
        builder = AgentBuilder().provider(provider)
        builder = builder.context(ClearToolResults(keep_last=1), window=window)
        async with builder.build() as agent:
            response = await agent.run(history)
            far = await agent.run([Message.user("hi")])  # far below: never counted
    assert counted == [len(history)]  # counted once, before the first send
    (sent, _) = chat_requests(server)
    results = [
        b.text for m in sent.decoded.messages for b in m.content if isinstance(b, ToolResult)
    ]
    assert sum(t.startswith("[tool result cleared") for t in results) == 3
    assert response.compaction is not None
    assert far.compaction is None


async def test_without_an_exact_counter_nothing_is_counted():
    fmt = next(f for f in FORMATS if f.name == "openai")
    history = _history()
    from kova.providers import heuristic_count_tokens

    window = int(heuristic_count_tokens(history) / 0.85 / 0.9)
    async with fmt.open_server(Script([reply_text("done")])) as server:
        builder = AgentBuilder().provider(fmt.build(server))
        builder = builder.context(ClearToolResults(keep_last=1), window=window)
        async with builder.build() as agent:
            response = await agent.run(history)
    assert response.compaction is None
    assert len(server.requests) == 1
