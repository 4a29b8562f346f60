"""The Bedrock provider against kova's fake Bedrock (real HTTP on loopback, SigV4 checked by
the fake with botocore, real AWS event-stream frames; no AWS account, no network).

Shows a tool loop with Claude's signed reasoning echoed back, extended thinking through
additional_model_request_fields, structured output, exact token counting and model listing.

Run it: python docs/examples/bedrock_provider.py  (needs the bedrock extra: botocore)
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
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.testing import Script, StreamReply, open_bedrock_server, reply_text
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Paris": "18°C, cloudy"}.get(city, "unknown")


# What the fake model answers: it reasons (a signed block), calls the tool, then answers.
SCRIPT = [
    StreamReply(
        response=ModelResponse(
            content=(
                Thinking(text="The user wants Paris weather; call get_weather.", signature="c2ln"),
                Text(text="Let me check."),
                ToolUse(id="tooluse_01", name="get_weather", input={"city": "Paris"}),
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
    async with open_bedrock_server(Script(SCRIPT), count_tokens=lambda m, t: 42) as server:
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="us.anthropic.claude-sonnet-4-20250514-v1:0",  # an inference profile
                # Leave these out to use the default chain (env, ~/.aws, SSO, IMDS, ...), or
                # set profile="..." or api_key="..." (a Bedrock API key).
                access_key_id=server.credentials["access_key_id"],
                secret_access_key=server.credentials["secret_access_key"],
                endpoint_url=server.base_url,  # leave out for bedrock-runtime.us-east-1...
                additional_model_request_fields={
                    "thinking": {"type": "enabled", "budget_tokens": 2048}
                },
            )
        )
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            response = await agent.run([Message.user("What's the weather in Paris?")])
            print("answer:", response.text)
            print("thinking shown once:", response.thinking)
            second = server.converse_requests()[1].json()
            echoed = [next(iter(block)) for block in second["messages"][1]["content"]]
            print("echoed blocks:", echoed)
            print("signature:", server.requests[0].headers["authorization"][:64], "...")

            fmt = ResponseFormat.named("city_weather", CITY_SCHEMA)
            value, _ = await agent.run_structured([Message.user("Paris as JSON")], fmt)
            print("structured:", value)
            output_config = server.converse_requests()[2].json()["outputConfig"]
            print("outputConfig:", output_config["textFormat"]["type"])

        async with provider.open():
            request = ChatRequest(
                messages=[Message.system("Be brief."), Message.user("Hello!")],
                config=InferenceConfig(),
            )
            print("count_tokens (CountTokens API):", await provider.count_tokens(request))
            models = await provider.list_models()
            print("models:", [model.id for model in models][:3], "...")


if __name__ == "__main__":
    trio.run(main)
