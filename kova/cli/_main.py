"""``kova``: the command line.

``kova demo`` runs a real agent (real provider, real HTTP, real tool loop) against kova's fake
OpenAI-compatible server on loopback, with a clearly labelled scripted model: no API key and no
network needed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._models import ModelResponse
    from ..testing import Reply, ScriptRequest

__all__ = ["main"]

_WEATHER = {
    "oslo": "-3°C, light snow, wind 4 m/s",
    "lisbon": "17°C, sunny",
    "tokyo": "9°C, clear",
}


def _demo_model(request: ScriptRequest) -> ModelResponse:
    """The scripted model: asks for the weather tool, then answers from its result."""
    from .. import Role, StopReason, Text, ToolResult, Usage
    from .._models import ModelResponse, ToolUse

    last = request.messages[-1]
    prompt_tokens = sum(len(m.text) for m in request.messages) // 4 + 12
    if last.role is Role.TOOL:
        result = next(b for b in last.content if isinstance(b, ToolResult))
        answer = (
            f"Right now in Oslo it is {result.text}. "
            "Dress warmly: a proper coat, gloves and boots with some grip."
        )
        return ModelResponse(
            content=(Text(text=answer),),
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=prompt_tokens, output_tokens=len(answer) // 4),
        )
    return ModelResponse(
        content=(
            Text(text="Let me look up the current weather in Oslo."),
            ToolUse(id="call_weather_1", name="get_weather", input={"city": "Oslo"}),
        ),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=prompt_tokens, output_tokens=18),
    )


async def _demo(out: Callable[[str], None]) -> None:
    from .. import Message, TextDelta
    from ..agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
    from ..providers.openai import OpenAiCompatibleProvider, OpenAiConfig
    from ..testing import Script, StreamReply, open_openai_server
    from ..tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city (demo data).

        Args:
            city: the city name.
        """
        return _WEATHER.get(city.lower(), "no data for that city")

    def model(request: ScriptRequest) -> Reply:
        # Stream in small pieces so the output visibly arrives as it is "generated".
        reply = _demo_model(request)
        return StreamReply(response=reply, chunk_chars=6) if request.stream else reply

    out("kova demo: a real agent over real HTTP. The model is a SCRIPT (no API key, no network).")
    async with open_openai_server(Script(model), model="scripted-demo-model") as server:
        out(f"fake OpenAI-compatible server listening on {server.base_url}")
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="scripted-demo-model", api_key="demo")
        )
        agent = (
            AgentBuilder()
            .provider(provider)
            .system_prompt("You are a helpful weather assistant.")
            .tool(get_weather)
            .build()
        )
        question = "What's the weather in Oslo, and what should I wear?"
        history = [Message.user(question)]
        out(f"\nuser> {question}")
        async with agent, agent.stream(history) as events:
            sys.stdout.write("assistant> ")
            async for event in events:
                match event:
                    case TextDelta(text=text):
                        sys.stdout.write(text)
                        sys.stdout.flush()
                    case ToolCallStarted(call=call):
                        out(f"\n  tool call   {call.name}({json.dumps(dict(call.input))})")
                    case ToolCallFinished(result=result):
                        out(f"  tool result {result.text}")
                        sys.stdout.write("assistant> ")
                    case TurnCompleted(response=response):
                        usage = response.usage
                        out(
                            f"\n\n{response.llm_calls} model calls over HTTP, "
                            f"{len(response.new_messages)} new messages for your history; "
                            f"usage: {usage.input_tokens} input + {usage.output_tokens} output "
                            f"= {usage.total_tokens} tokens"
                        )
        out(f"the fake server saw {len(server.chat_requests())} chat completion requests")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kova`` console script."""
    parser = argparse.ArgumentParser(prog="kova", description="kova: LLM agents on trio")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run a real agent against a local scripted model")
    serve = commands.add_parser(
        "serve",
        help="chat with an agent in the browser (approve its tool calls from the page)",
        description="Serve a chat agent behind kova's web view; prints the page's address.",
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="the scripted demo model on a local fake server (no API key, no network)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    serve.add_argument("--system", help="a system prompt")
    serve.add_argument(
        "--yes", action="store_true", help="run every tool call without asking on the page"
    )
    commands.add_parser("version", help="print kova's version")
    args = parser.parse_args(argv)
    if args.command == "version":
        from .. import __version__

        print(__version__)
        return 0
    if args.command == "serve":
        if not args.demo:
            parser.error("kova serve needs --demo (provider flags arrive with kova chat's)")
        interrupted = False
        try:
            trio.run(_serve_demo, args)
        except* KeyboardInterrupt:  # Ctrl-C stops the server: quietly
            interrupted = True
        if interrupted:
            print(file=sys.stderr)
            return 130
        return 0
    trio.run(_demo, print)
    return 0


async def _serve_demo(args: argparse.Namespace) -> None:
    """``kova serve --demo``: the demo's scripted weather model behind the web view."""
    from ..providers.openai import OpenAiCompatibleProvider, OpenAiConfig
    from ..testing import Script, StreamReply, open_openai_server
    from ..tools import tool
    from ._serve import serve_chat

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city (demo data).

        Args:
            city: the city name.
        """
        return _WEATHER.get(city.lower(), "no data for that city")

    def model(request: ScriptRequest) -> Reply:
        reply = _demo_model(request)
        return StreamReply(response=reply, chunk_chars=6) if request.stream else reply

    async with open_openai_server(Script(model), model="scripted-demo-model") as fake:
        print("kova serve --demo: the model is a SCRIPT on a local fake server (no network)")
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=fake.base_url, model="scripted-demo-model", api_key="demo")
        )
        await serve_chat(
            provider,
            host=args.host,
            port=args.port,
            system_prompt=args.system or "You are a helpful weather assistant.",
            tools=[get_weather],
            approve_all=args.yes,
        )


if __name__ == "__main__":
    sys.exit(main())
