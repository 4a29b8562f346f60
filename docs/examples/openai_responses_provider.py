"""The OpenAI Responses API provider against kova's fake Responses server (real HTTP on
loopback, no key): an agent with a tool on a reasoning model, streamed, and what went back to
the server in the tool loop (the reasoning item, unchanged, before the calls it led to).

Run it: python docs/examples/openai_responses_provider.py
"""

from __future__ import annotations

import trio

from kova import Message, TextDelta, ThinkingDelta, Usage
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.providers import ChatRequest
from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider
from kova.testing import (
    Script,
    StreamReply,
    open_responses_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "-3°C, snow", "Paris": "18°C, cloudy"}.get(city, "unknown")


# A clearly labelled script plays the model: it thinks, calls the tool twice in parallel,
# then answers.
SCRIPT = Script(
    [
        StreamReply(
            response=reply_tool_calls(
                ("get_weather", {"city": "Oslo"}),
                ("get_weather", {"city": "Paris"}),
                thinking="I need the live weather for both cities.",
            ),
            chunk_chars=8,
        ),
        StreamReply(
            response=reply_text(
                "Paris is warmer: 18°C against Oslo's -3°C.",
                usage=Usage(input_tokens=1300, output_tokens=40, cache_read_tokens=1024,
                            reasoning_tokens=24),
            ),
            chunk_chars=6,
        ),
    ]
)  # fmt: skip


async def main() -> None:
    async with open_responses_server(SCRIPT) as server:
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(
                model="gpt-5.4",
                api_key="sk-demo",  # or set OPENAI_API_KEY
                base_url=server.base_url,  # leave out to talk to https://api.openai.com
                reasoning_effort="medium",
                reasoning_summary="auto",
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        question = [Message.user("Which is warmer, Oslo or Paris?")]
        async with agent, agent.stream(question) as events:
            async for event in events:
                match event:
                    case ThinkingDelta(text=text):
                        print(f"[thinking] {text}")
                    case TextDelta(text=text):
                        print(f"[text] {text!r}")
                    case ToolCallStarted(call=call):
                        print(f"[tool] {call.name}({dict(call.input)})")
                    case ToolCallFinished(result=result):
                        print(f"[tool result] {result.text}")
                    case TurnCompleted(response=response):
                        usage = response.usage
                        print(
                            f"[done] {response.llm_calls} calls, {usage.input_tokens} in "
                            f"({usage.cache_read_tokens} cached), {usage.output_tokens} out "
                            f"({usage.reasoning_tokens} reasoning)"
                        )

        # The second request: stateless, the whole history as items, the reasoning item sent
        # back unchanged (id and encrypted_content) right before the calls it led to.
        second = server.responses_requests()[1].json()
        print("store:", second["store"], "include:", second["include"])
        print("items sent:", [item["type"] for item in second["input"]])

        # Exact token counting goes to POST /v1/responses/input_tokens.
        async with provider.open():
            tokens = await provider.count_tokens(ChatRequest.of("How many tokens is this?"))
        print("input tokens:", tokens)


if __name__ == "__main__":
    trio.run(main)
