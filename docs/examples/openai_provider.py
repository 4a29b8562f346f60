"""The OpenAI-compatible provider against kova's fake OpenAI server (real HTTP on loopback,
no key): an agent with a tool, streamed; a direct provider call; embeddings; what the server
received.

Run it: python docs/examples/openai_provider.py
"""

from __future__ import annotations

import trio

from kova import Message, TextDelta, ThinkingDelta, Usage
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiEmbeddingConfig,
    OpenAiEmbeddingProvider,
)
from kova.testing import Script, StreamReply, open_openai_server, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "-3°C, snow"}.get(city, "unknown")


# A clearly labelled script plays the model: first it calls the tool, then it answers.
SCRIPT = Script(
    [
        StreamReply(response=reply_tool_calls(("get_weather", {"city": "Oslo"}))),
        StreamReply(
            response=reply_text(
                "Oslo: -3°C with snow. Wrap up warm!",
                usage=Usage(input_tokens=1300, output_tokens=12, cache_read_tokens=1024),
                thinking="The tool said snow.",
            ),
            chunk_chars=6,
        ),
    ]
)


async def main() -> None:
    async with open_openai_server(SCRIPT) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(
                model="gpt-4.1",
                api_key="sk-demo",  # or set OPENAI_API_KEY
                base_url=server.base_url,  # leave out to talk to https://api.openai.com
                max_tokens=512,
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent, agent.stream([Message.user("Weather in Oslo?")]) as events:
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
                            f"({usage.cache_read_tokens} cached), {usage.output_tokens} out"
                        )

        # What went over the wire: the second request carries the tool round trip.
        second = server.chat_requests()[1].json()
        print("roles sent:", [message["role"] for message in second["messages"]])
        print("stream_options:", second["stream_options"])

        # Embeddings, from the same fake server (deterministic vectors).
        embedder = OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=server.base_url, api_key="sk-demo", dimensions=4)
        )
        async with embedder.open():
            vectors = await embedder.embed(["snow", "sun"])
        print("embeddings:", [[round(x, 3) for x in vector] for vector in vectors])


if __name__ == "__main__":
    trio.run(main)
