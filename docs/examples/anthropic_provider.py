"""The Anthropic provider against kova's fake Anthropic server (real HTTP on loopback, no key).

Shows adaptive thinking with signed blocks echoed back in a tool loop, prompt-cache usage,
effort, structured output and exact token counting.

Run it: python docs/examples/anthropic_provider.py
"""

from __future__ import annotations

import trio

from kova import (
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    Thinking,
    ToolUse,
    Usage,
)
from kova.agent import AgentBuilder
from kova.providers import ChatRequest, ModelResponse
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.testing import Script, StreamReply, open_anthropic_server, reply_text
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Paris": "18°C, cloudy"}.get(city, "unknown")


# What the fake model answers: first it thinks (a signed block) and calls the tool, then it
# answers, reporting that most of the prompt came from the cache.
SCRIPT = [
    StreamReply(
        response=ModelResponse(
            content=(
                Thinking(text="The user wants Paris weather; call get_weather.", signature="c2ln"),
                Text(text="Let me check."),
                ToolUse(id="toolu_01", name="get_weather", input={"city": "Paris"}),
            ),
            stop_reason=StopReason.TOOL_USE,
            usage=Usage(input_tokens=1200, output_tokens=40, cache_creation_tokens=1100),
        )
    ),
    reply_text(
        "It is 18°C and cloudy in Paris.",
        usage=Usage(input_tokens=1260, output_tokens=12, cache_read_tokens=1100),
    ),
    reply_text('{"city": "Paris", "celsius": 18}'),
]

CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


async def main() -> None:
    async with open_anthropic_server(Script(SCRIPT), api_key="sk-ant-demo") as server:
        provider = AnthropicProvider(
            AnthropicConfig(
                model="claude-opus-4-8",
                api_key="sk-ant-demo",  # or set ANTHROPIC_API_KEY
                base_url=server.base_url,  # leave out to talk to https://api.anthropic.com
                effort="high",  # output_config.effort: low, medium, high, xhigh or max
                # adaptive_thinking=True and cache=True are the defaults
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            # A tool loop with thinking: the signed block goes back verbatim in request 2.
            history = [Message.user("What's the weather in Paris?")]
            response = await agent.run(history)
            print("answer:", response.text)
            print("thinking shown once:", response.thinking)
            first_turn = server.messages_requests()[1].json()["messages"][1]["content"]
            print("echoed blocks:", [block["type"] for block in first_turn])
            print(
                f"cache: read {response.usage.cache_read_tokens}, "
                f"written {response.usage.cache_creation_tokens} tokens"
            )

            # Structured output: the schema travels as output_config.format.
            fmt = ResponseFormat.named("city_weather", CITY_SCHEMA)
            value, _ = await agent.run_structured([Message.user("Paris as JSON")], fmt)
            print("structured:", value)
            output_config = server.messages_requests()[2].json()["output_config"]
            print("output_config:", output_config)

        # Exact prompt size from /v1/messages/count_tokens (same system, tools, messages).
        async with provider.open():
            tokens = await provider.count_tokens(
                ChatRequest(
                    messages=[Message.system("Be brief."), Message.user("Hello!")],
                    tools=[],
                    config=InferenceConfig(),
                )
            )
        print("count_tokens:", tokens)


if __name__ == "__main__":
    trio.run(main)
