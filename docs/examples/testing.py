"""kova.testing recipes: scripted and function providers, both fake servers, errors and cuts,
thinking replies, and MockClock timing. Each recipe asserts what it shows.

Run it: python docs/examples/testing.py
"""

from __future__ import annotations

import json

import trio
import trio.testing

import kova
import kova.providers
from kova import Message, StopReason, Text, ToolResult, Usage
from kova.agent import AgentBuilder, RetryConfig
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    Script,
    ScriptedProvider,
    ScriptExhaustedError,
    ScriptRequest,
    StreamReply,
    TestProvider,
    as_script,
    open_anthropic_server,
    open_openai_server,
    reply_text,
    reply_tool_calls,
    response_to_events,
    stream_events,
    with_thinking,
)
from kova.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


HISTORY = [Message.user("What is 2 + 3?")]


async def scripted_provider() -> None:
    # Replies in order; every request is recorded for assertions.
    provider = ScriptedProvider([reply_tool_calls(("add", {"a": 2, "b": 3})), reply_text("5")])
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        response = await agent.run(HISTORY)
    assert response.text == "5"
    tool_message = provider.requests[1].messages[-1]
    result = tool_message.content[0]
    assert isinstance(result, ToolResult)
    assert result.text == "5"
    assert provider.script.remaining == 0
    print("scripted provider:", response.text, f"({len(provider.requests)} requests)")


async def function_provider() -> None:
    # A function of the request: answer from what the model was asked.
    def model(request: ScriptRequest) -> kova.providers.ModelResponse:
        last = request.messages[-1]
        if any(isinstance(block, ToolResult) for block in last.content):
            return reply_text(f"The tool said {last.content[0].text}.")  # type: ignore[union-attr]
        return reply_tool_calls(("add", {"a": 2, "b": 3}))

    async with AgentBuilder().provider(FunctionProvider(model)).tool(add).build() as agent:
        response = await agent.run(HISTORY)
    assert response.text == "The tool said 5."
    print("function provider:", response.text)


async def no_script_provider() -> None:
    # No script at all: every tool once with arguments made from its schema, then an answer.
    provider = TestProvider()
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        response = await agent.run(HISTORY)
        assert json.loads(response.text) == {"add": "2"}  # add(a=1, b=1)
        total, _ = await agent.run_structured(HISTORY, int)  # structured output, schema-valid
    assert total == 1
    print("test provider:", response.text, "then", total)


async def latency_on_mock_clock() -> None:
    # latency= waits in virtual time: the assertion is exact, the test takes no real time.
    provider = FunctionProvider(lambda request: reply_text("late"), latency=2.0)
    async with AgentBuilder().provider(provider).build() as agent:
        start = trio.current_time()
        await agent.run(HISTORY)
    assert trio.current_time() - start == 2.0
    print("latency: answered after exactly 2.0 virtual seconds")


async def rate_limit_retry_on_mock_clock() -> None:
    # A 429 with retry-after: the agent waits exactly that long, then the retry succeeds.
    provider = ScriptedProvider([ErrorReply(status_code=429, retry_after=3.0), reply_text("ok")])
    async with AgentBuilder().provider(provider).build() as agent:
        start = trio.current_time()
        response = await agent.run(HISTORY)
    assert response.text == "ok"
    assert trio.current_time() - start == 3.0
    print("rate limit: retried after exactly 3.0 virtual seconds")


async def errors_and_cuts() -> None:
    # An error the agent does not retry reaches the caller as the matching kova error.
    provider = ScriptedProvider([ErrorReply(status_code=401, message="bad key")])
    async with AgentBuilder().provider(provider).build() as agent:
        try:
            await agent.run(HISTORY)
        except kova.ProviderAuthError as error:
            print("error reply:", type(error).__name__, error.status_code)
    # A stream cut after two events, with retries off, fails the stream.
    cut = StreamReply(response=reply_text("never finished"), cut_after=2)
    provider = ScriptedProvider([cut])
    no_retries = RetryConfig.disabled()
    async with AgentBuilder().provider(provider).retry_config(no_retries).build() as agent:
        try:
            async with agent.stream(HISTORY) as events:
                async for _ in events:
                    pass
        except* (kova.StreamError, kova.KovaConnectionError) as group:
            print("cut stream:", type(group.exceptions[0]).__name__)


async def thinking_replies() -> None:
    # with_thinking() adds a Thinking block (signed, for Anthropic-style models).
    answer = with_thinking(reply_text("5"), "2 + 3 = 5", signature="sig-1")
    calls = reply_tool_calls(("add", {"a": 2, "b": 3}), thinking="I should add.")
    provider = ScriptedProvider([calls, answer])
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        response = await agent.run(HISTORY)
    assert response.text == "5"
    assert response.thinking is not None
    assert "2 + 3 = 5" in response.thinking
    kinds = [type(event).__name__ for event in stream_events(answer)]
    assert kinds[0] == "ThinkingDelta"
    assert "SignedThinking" in kinds
    print("thinking:", response.thinking.replace("\n", " / "))


async def scripts_and_events() -> None:
    # One Script can drive a provider or a fake server; as_script accepts the same inputs.
    script = as_script([reply_text("a")])
    assert isinstance(script, Script)
    try:
        as_script("not a script")  # type: ignore[arg-type]
    except TypeError as error:
        print("as_script:", error)
    try:
        await Script([]).next_reply(
            ScriptRequest(request=kova.providers.ChatRequest(messages=HISTORY), stream=False)
        )
    except ScriptExhaustedError as error:
        print("exhausted:", error)
    response = kova.providers.ModelResponse(
        content=(Text(text="hello world"),),
        stop_reason=StopReason.END_TURN,
        usage=Usage(input_tokens=1, output_tokens=2),
    )
    events = response_to_events(response, chunk_chars=5)
    print("events:", [type(event).__name__ for event in events])


async def fake_openai_server() -> None:
    # Real HTTP on loopback: the production provider talks to a scripted server.
    async with open_openai_server(
        [reply_tool_calls(("add", {"a": 2, "b": 3})), reply_text("5")]
    ) as server:
        config = OpenAiConfig(base_url=server.base_url, model="gpt-fake", api_key="test")
        agent = AgentBuilder().provider(OpenAiCompatibleProvider(config)).tool(add).build()
        async with agent:
            response = await agent.run(HISTORY)
        bodies = [json.loads(request.body) for request in server.chat_requests()]
    assert response.text == "5"
    assert bodies[0]["tools"][0]["function"]["name"] == "add"
    print("fake OpenAI server:", response.text, f"({len(bodies)} chat requests)")


async def fake_anthropic_server() -> None:
    # A function script behind the Anthropic wire format; thinking streams as thinking.
    def model(request: ScriptRequest) -> kova.providers.ModelResponse:
        return with_thinking(reply_text("Hi!"), "greet back", signature="sig")

    async with open_anthropic_server(model) as server:
        config = AnthropicConfig(model="claude-fake", api_key="test", base_url=server.base_url)
        async with AgentBuilder().provider(AnthropicProvider(config)).build() as agent:
            response = await agent.run([Message.user("Hello")])
        assert len(server.messages_requests()) == 1
    assert response.text == "Hi!"
    assert response.thinking == "greet back"
    print("fake Anthropic server:", response.text, "thinking:", response.thinking)


async def fake_gemini_and_ollama_servers() -> None:
    # The same script behind the Gemini and Ollama wire formats.
    from kova.providers.gemini import GeminiConfig, GeminiProvider
    from kova.providers.ollama import OllamaConfig, OllamaProvider
    from kova.testing import open_gemini_server, open_ollama_server

    async with open_gemini_server([reply_text("from Gemini")]) as gemini:
        config = GeminiConfig(model="gemini-fake", api_key="test", base_url=gemini.base_url)
        async with AgentBuilder().provider(GeminiProvider(config)).build() as agent:
            first = await agent.run(HISTORY)
        assert len(gemini.chat_requests()) == 1
    async with open_ollama_server([reply_text("from Ollama")]) as ollama:
        local = OllamaConfig(model="llama3.2", base_url=ollama.base_url)
        async with AgentBuilder().provider(OllamaProvider(local)).build() as agent:
            second = await agent.run(HISTORY)
        assert len(ollama.chat_requests()) == 1
    print("fake Gemini and Ollama servers:", first.text, "/", second.text)


async def cancel_a_stalled_stream() -> None:
    # hold_after: two events, then the server stalls; a cancel scope ends the turn cleanly.
    stall = StreamReply(response=reply_text("Partial answer..."), chunk_chars=4, hold_after=2)
    async with open_openai_server([stall]) as server:
        config = OpenAiConfig(base_url=server.base_url, model="gpt-fake", api_key="test")
        seen: list[str] = []
        async with AgentBuilder().provider(OpenAiCompatibleProvider(config)).build() as agent:
            with trio.move_on_after(0.5) as scope:
                async with agent.stream(HISTORY) as events:
                    async for event in events:
                        if isinstance(event, kova.TextDelta):
                            seen.append(event.text)
    assert scope.cancelled_caught
    print("stalled stream cancelled after:", "".join(seen))


async def main() -> None:
    await scripted_provider()
    await function_provider()
    await no_script_provider()
    await errors_and_cuts()
    await thinking_replies()
    await scripts_and_events()
    await fake_openai_server()
    await fake_anthropic_server()
    await fake_gemini_and_ollama_servers()
    await cancel_a_stalled_stream()


async def on_mock_clock() -> None:
    await latency_on_mock_clock()
    await rate_limit_retry_on_mock_clock()


if __name__ == "__main__":
    trio.run(main)
    # Virtual time: sleeps and back-offs jump instantly, and times are exact.
    trio.run(on_mock_clock, clock=trio.testing.MockClock(autojump_threshold=0))
