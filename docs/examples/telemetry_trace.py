"""The OpenTelemetry trace of one turn, printed as a tree (docs/telemetry.md shows its output).

A scripted model (no network, no API key) asks for two tool calls at once: a native tool and
a tool of an in-process MCP server. The spans go to the SDK's in-memory exporter; a real
application would use ``TelemetryConfig`` with an OTLP exporter instead.

Run it: python docs/examples/telemetry_trace.py
"""

from __future__ import annotations

import trio
from mcp.server.mcpserver import MCPServer
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kova import InferenceConfig, Message, Usage
from kova.agent import AgentBuilder
from kova.mcp import InProcessTransport, McpClient
from kova.telemetry.otel import OtelSubscriber
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


@tool
async def nap(seconds: float) -> str:
    """Rest a moment.

    Args:
        seconds: how long.
    """
    await trio.sleep(seconds)
    return "rested"


def weather_server() -> MCPServer:
    server = MCPServer("north")

    @server.tool()
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: -3°C"

    return server


def render(spans: list[ReadableSpan]) -> list[str]:
    """Spans as an indented tree, children in start order, with their main attributes."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent else None
        children.setdefault(parent, []).append(span)
    start = min(span.start_time or 0 for span in spans)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            offset = ((span.start_time or 0) - start) / 1e6
            took = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            lines.append(
                f"{'    ' * depth}{span.name}  [{span.kind.name}, +{offset:.0f} ms, {took:.0f} ms]"
            )
            for key, value in (span.attributes or {}).items():
                lines.append(f"{'    ' * depth}    {key} = {value!r}")
            for event in span.events:
                lines.append(f"{'    ' * depth}    event {event.name}")
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def main() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    turn = [
        reply_tool_calls(
            ("nap", {"seconds": 0.05}),
            ("north__get_weather", {"city": "Oslo"}),
            usage=Usage(input_tokens=120, output_tokens=31),
        ),
        reply_text("Oslo is at -3°C.", usage=Usage(input_tokens=180, output_tokens=9)),
    ]
    model = ScriptedProvider(turn * 2)
    inference = InferenceConfig(model="demo-model", max_tokens=512, temperature=0.2)
    async with McpClient.connect(InProcessTransport(weather_server())) as north:
        builder = AgentBuilder().provider(model).tool(nap).inference_config(inference)
        await builder.mcp_client(north, "north")
        async with builder.name("weather-agent").build() as agent:
            history = [Message.user("Weather in Oslo? Rest first.")]
            await agent.run(history)  # a first turn, unobserved: imports and caches warm up
            agent.telemetry.subscribe(OtelSubscriber(tracer_provider=tracer_provider))
            await agent.run(history)
    print("\n".join(render(list(exporter.get_finished_spans()))))


if __name__ == "__main__":
    trio.run(main)
