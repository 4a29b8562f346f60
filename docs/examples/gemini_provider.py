"""The Gemini provider against kova's fake Gemini server (real HTTP on loopback, no key).

Shows a streamed tool loop whose function call goes back with its thoughtSignature, thinking
kept out of the answer, structured output, exact token counting, the paged model list and
Gemini embeddings.

Run it: python docs/examples/gemini_provider.py
"""

from __future__ import annotations

import trio

from kova import Message, ResponseFormat, StopReason, ToolUse, Usage
from kova.agent import AgentBuilder
from kova.providers import ChatRequest, ModelResponse
from kova.providers.gemini import (
    GeminiConfig,
    GeminiEmbeddingConfig,
    GeminiEmbeddingProvider,
    GeminiProvider,
)
from kova.testing import Script, StreamReply, open_gemini_server, reply_text
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Paris": "18°C, cloudy"}.get(city, "unknown")


# What the fake model answers: it thinks, calls the tool (the call carries a thought
# signature that must go back unchanged), then answers; then a JSON answer.
SCRIPT = [
    StreamReply(
        response=ModelResponse(
            content=(
                ToolUse(
                    id="fc_1",
                    name="get_weather",
                    input={"city": "Paris"},
                    provider_metadata={"gemini_thought_signature": "CiIBVKhc7s"},
                ),
            ),
            stop_reason=StopReason.TOOL_USE,
            usage=Usage(input_tokens=57, output_tokens=135, reasoning_tokens=120),
            thinking="The user wants Paris weather; call get_weather.",
        )
    ),
    reply_text("It is 18°C and cloudy in Paris."),
    reply_text('{"city": "Paris", "celsius": 18}'),
]

CITY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",  # Gemini rejects it: dropped
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": ["number", "null"]}},
    "required": ["city", "celsius"],
}


async def main() -> None:
    async with open_gemini_server(Script(SCRIPT), api_key="AIza-demo") as server:
        provider = GeminiProvider(
            GeminiConfig(
                model="gemini-2.5-flash",
                api_key="AIza-demo",  # or set GEMINI_API_KEY / GOOGLE_API_KEY
                base_url=server.base_url,  # leave out to talk to Google
                thinking_budget=1024,  # -1 dynamic, 0 off, N a cap (thinking_level on Gemini 3)
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            response = await agent.run([Message.user("What's the weather in Paris?")])
            print("answer:", response.text)
            echoed = server.chat_requests()[1].json()["contents"][1]["parts"][0]
            print("call echoed with its signature:", echoed)

            fmt = ResponseFormat.named("city_weather", CITY_SCHEMA)
            value, _ = await agent.run_structured([Message.user("Paris as JSON")], fmt)
            print("structured:", value)
            generation = server.chat_requests()[2].json()["generationConfig"]
            print("responseSchema sent:", generation["responseSchema"])

        async with provider.open():
            tokens = await provider.count_tokens(ChatRequest.of("Hello, Gemini!"))
            models = await provider.list_models()
        print("countTokens:", tokens)
        print("models:", [model.id for model in models])

        embedder = GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(
                model="gemini-embedding-001",
                api_key="AIza-demo",
                base_url=server.base_url,
                dimensions=8,
                task_type="RETRIEVAL_DOCUMENT",
            )
        )
        async with embedder.open():
            vectors = await embedder.embed(["first document", "second document"])
        print("embeddings:", len(vectors), "vectors of", len(vectors[0]))


if __name__ == "__main__":
    trio.run(main)
