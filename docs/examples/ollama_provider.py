"""The Ollama provider against kova's fake Ollama server (real HTTP on loopback).

Shows a streamed tool loop (Ollama sends no call ids: kova makes stable ones and answers each
call by its tool name), thinking as its own stream, structured output through ``format``,
generation options, the model list and Ollama embeddings.

Run it: python docs/examples/ollama_provider.py
"""

from __future__ import annotations

import trio

from kova import Message, ResponseFormat, TextDelta, ThinkingDelta
from kova.agent import AgentBuilder
from kova.providers.ollama import (
    OllamaConfig,
    OllamaEmbeddingConfig,
    OllamaEmbeddingProvider,
    OllamaProvider,
    OllamaThink,
)
from kova.testing import Script, StreamReply, open_ollama_server, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "4°C, rain", "Rome": "21°C, sun"}.get(city, "unknown")


SCRIPT = [
    StreamReply(
        response=reply_tool_calls(
            ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})
        )
    ),
    StreamReply(
        response=reply_text("Oslo: 4°C and rain. Rome: 21°C and sun.", thinking="Compare.")
    ),
    reply_text('{"warmer": "Rome"}'),
]


async def main() -> None:
    async with open_ollama_server(Script(SCRIPT)) as server:
        provider = OllamaProvider(
            OllamaConfig(
                model="qwen3",
                base_url=server.base_url,  # leave out for http://localhost:11434 (or OLLAMA_HOST)
                think=OllamaThink.HIGH,  # "think": "high"; ENABLED sends true
                keep_alive="10m",
                extra_options={"num_ctx": 8192, "seed": 7},
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            text, thinking = [], []
            async with agent.stream([Message.user("Weather in Oslo and Rome?")]) as events:
                async for event in events:
                    match event:
                        case TextDelta(text=piece):
                            text.append(piece)
                        case ThinkingDelta(text=piece):
                            thinking.append(piece)
            print("answer:", "".join(text))
            print("thinking:", "".join(thinking))
            second = server.chat_requests()[1].json()
            print("tool results sent:", [m for m in second["messages"] if m["role"] == "tool"])
            print("think and options:", second["think"], second["options"])

            fmt = ResponseFormat.named(
                "warmer", {"type": "object", "properties": {"warmer": {"type": "string"}}}
            )
            value, _ = await agent.run_structured([Message.user("Which is warmer? JSON.")], fmt)
            print("structured:", value, "format sent:", server.chat_requests()[2].json()["format"])

        async with provider.open():
            print("models:", [model.id for model in await provider.list_models()])

        embedder = OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(model="nomic-embed-text", base_url=server.base_url)
        )
        async with embedder.open():
            vectors = await embedder.embed(["first document", "second document"])
        print("embeddings:", len(vectors), "vectors, usage:", vectors.usage)


if __name__ == "__main__":
    trio.run(main)
