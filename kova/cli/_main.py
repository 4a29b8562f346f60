"""``kova``: the command line (also ``python -m kova``).

- ``kova chat``: an interactive chat with a real provider (``--provider``, ``--model``,
  ``--base-url``; keys from the usual environment variables), MCP servers attachable with
  ``--mcp``, history kept in ``--history FILE``.
- ``kova models``: the models a provider offers.
- ``kova mcp tools -- CMD ARGS...``: the tools an MCP server (over stdio) offers.
- ``kova mcp serve``: an agent as an MCP tool over stdio, for an MCP client to launch.
- ``kova demo`` runs a real agent (real provider, real HTTP, real tool loop) against kova's
  fake OpenAI-compatible server on loopback, with a clearly labelled scripted model: no API
  key and no network needed.
- ``kova version``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .._errors import KovaError
from .._extras import MissingExtraError, require_extra
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from .._models import ModelResponse
    from ..providers.openai import OpenAiCompatibleProvider
    from ..sessions import SessionStore
    from ..testing import FakeOpenAiServer, Reply, ScriptRequest
    from ..tools import Tool
    from ._providers import SelectedProvider

__all__ = ["main"]

_WEATHER = {
    "oslo": "-3°C, light snow, wind 4 m/s",
    "lisbon": "17°C, sunny",
    "tokyo": "9°C, clear",
}
_KNOWN = ", ".join(name.title() for name in _WEATHER)
_CITY_IN = re.compile(r"\b(?:in|for|at)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
_NO_DATA = "no data for that city"
_DEMO_SYSTEM = "You are a helpful weather assistant."


def _asked_city(text: str) -> str | None:
    """The city a question is about: one the demo knows, else a capitalised name after
    "in" / "for" / "at" (``None``: no city in the question)."""
    for city in _WEATHER:
        if re.search(rf"\b{city}\b", text, re.IGNORECASE):
            return city.title()
    found = _CITY_IN.search(text)
    return found.group(1) if found else None


def _advice(weather: str) -> str:
    degrees = re.match(r"(-?\d+)", weather)
    if degrees is None:
        return ""
    if int(degrees.group(1)) < 5:
        return " Dress warmly: a proper coat, gloves and boots with some grip."
    if int(degrees.group(1)) < 15:
        return " A jacket or a warm sweater will do."
    return " Light clothes will do; take sunglasses."


def _demo_model(request: ScriptRequest) -> ModelResponse:
    """The scripted model: asks for the weather tool for the city the user named, then
    answers from its result (a denied or failed call, or a city without data, included)."""
    from .. import Role, StopReason, Text, ToolResult, Usage
    from .._models import ModelResponse, ToolUse

    messages = request.messages
    last = messages[-1]
    prompt_tokens = sum(len(m.text) for m in messages) // 4 + 12

    def answer(text: str) -> ModelResponse:
        return ModelResponse(
            content=(Text(text=text),),
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=prompt_tokens, output_tokens=len(text) // 4),
        )

    if last.role is Role.TOOL:
        result = next(b for b in last.content if isinstance(b, ToolResult))
        calls = [b for b in messages[-2].content if isinstance(b, ToolUse)]
        call = next((b for b in calls if b.id == result.tool_use_id), None)
        city = str(call.input.get("city", "that city")) if call is not None else "that city"
        # OpenAI's wire format has no error flag on a tool result: a denial is in its text.
        if result.is_error or "denied" in result.text:
            return answer(
                f"I could not check the weather in {city}: {result.text}. "
                "Without the forecast I can only suggest looking out of the window."
            )
        if result.text == _NO_DATA:
            return answer(f"I have no weather data for {city}; this demo knows {_KNOWN}.")
        return answer(f"Right now in {city} it is {result.text}.{_advice(result.text)}")
    asked = _asked_city(last.text)
    if asked is None:
        return answer(f"Which city would you like the weather for? This demo knows {_KNOWN}.")
    count = sum(1 for m in messages for b in m.content if isinstance(b, ToolUse))
    return ModelResponse(
        content=(
            Text(text=f"Let me look up the current weather in {asked}."),
            ToolUse(id=f"call_weather_{count + 1}", name="get_weather", input={"city": asked}),
        ),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=prompt_tokens, output_tokens=18),
    )


@asynccontextmanager
async def _open_demo() -> AsyncIterator[tuple[FakeOpenAiServer, OpenAiCompatibleProvider, Tool]]:
    """The scripted demo model on a fake OpenAI-compatible server on loopback: the server, a
    provider pointed at it, and the weather tool the model asks for."""
    from ..providers.openai import OpenAiCompatibleProvider, OpenAiConfig
    from ..testing import Script, StreamReply, open_openai_server
    from ..tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city (demo data).

        Args:
            city: the city name.
        """
        return _WEATHER.get(city.lower(), _NO_DATA)

    def model(request: ScriptRequest) -> Reply:
        # Stream in small pieces so the output visibly arrives as it is "generated".
        reply = _demo_model(request)
        return StreamReply(response=reply, chunk_chars=6) if request.stream else reply

    async with open_openai_server(Script(model), model="scripted-demo-model") as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="scripted-demo-model", api_key="demo")
        )
        yield server, provider, get_weather


@asynccontextmanager
async def _chosen(
    args: argparse.Namespace,
) -> AsyncIterator[tuple[SelectedProvider, Tool | None, str | None]]:
    """The provider ``--demo`` (its scripted weather model on a fake server, for the block)
    or the provider flags choose; the demo's weather tool (``None`` for a real provider); the
    system prompt (``--system``, else the demo's own)."""
    from ._providers import SelectedProvider, select_provider

    if not args.demo:
        yield select_provider(args.provider, args.model, args.base_url), None, args.system
        return
    async with _open_demo() as (_server, provider, get_weather):
        selected = SelectedProvider(name="demo", model="scripted-demo-model", provider=provider)
        yield selected, get_weather, args.system or _DEMO_SYSTEM


async def _demo(out: Callable[[str], None]) -> None:
    from .. import Message, TextDelta
    from ..agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted

    out("kova demo: a real agent over real HTTP. The model is a SCRIPT (no API key, no network).")
    async with _open_demo() as (server, provider, get_weather):
        out(f"fake OpenAI-compatible server listening on {server.base_url}")
        agent = (
            AgentBuilder().provider(provider).system_prompt(_DEMO_SYSTEM).tool(get_weather).build()
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


def _print_errors(group: BaseExceptionGroup[Exception]) -> None:
    for error in group.exceptions:
        print(f"kova: {error}", file=sys.stderr)


def _add_provider_flags(parser: argparse.ArgumentParser) -> None:
    from ._providers import PROVIDERS

    parser.add_argument(
        "--provider",
        choices=sorted(PROVIDERS),
        help="the provider (default: $KOVA_PROVIDER, else the first whose API key is set)",
    )
    parser.add_argument("--model", help="the model id (default: $KOVA_MODEL, else per provider)")
    parser.add_argument(
        "--base-url", help="the API base URL (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)"
    )


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="kova", description="kova: LLM agents on trio")
    parser.add_argument("--version", action="version", version=f"kova {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_chat(commands)
    models = commands.add_parser("models", help="list the models a provider offers")
    _add_provider_flags(models)
    _add_mcp(commands)
    commands.add_parser("demo", help="run a real agent against a local scripted model")
    _add_serve(commands)
    commands.add_parser("version", help="print kova's version")
    return parser


def _add_agent_flags(parser: argparse.ArgumentParser) -> None:
    """The provider flags, ``--demo`` instead of them, and ``--system``: what every command
    that runs an agent takes."""
    _add_provider_flags(parser)
    parser.add_argument(
        "--demo",
        action="store_true",
        help="the scripted demo model on a local fake server (no API key, no network)",
    )
    parser.add_argument("--system", help="a system prompt")


def _add_chat(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser(
        "chat",
        help="chat with a model in the terminal",
        description="Chat with a model. Ctrl-C cancels the running turn; /exit or Ctrl-D quits.",
    )
    _add_agent_flags(chat)
    chat.add_argument("--history", type=Path, help="keep the conversation in this JSON file")
    chat.add_argument(
        "--session",
        metavar="NAME",
        help="keep the conversation in this session (/sessions, /fork, /undo work on it)",
    )
    chat.add_argument(
        "--sessions-db",
        type=Path,
        metavar="FILE",
        help="the sessions' SQLite file (default: $KOVA_SESSIONS_DB, else ~/.kova/sessions.db)",
    )
    chat.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="CMD",
        help='an MCP server over stdio, e.g. "npx -y @modelcontextprotocol/server-everything" '
        '(or "PREFIX=CMD"); repeatable',
    )
    chat.add_argument(
        "--mcp-include",
        action="append",
        default=[],
        metavar="NAMES",
        help="only these MCP tools: comma-separated names or globs, the server's own "
        '("add") or prefixed ("mcp__add"); repeatable',
    )
    chat.add_argument(
        "--mcp-exclude",
        action="append",
        default=[],
        metavar="NAMES",
        help="not these MCP tools (names or globs, as --mcp-include); repeatable",
    )
    chat.add_argument(
        "--yes", action="store_true", help="run every tool call without asking for approval"
    )
    chat.add_argument("--no-color", action="store_true", help="no ANSI colours")


def _add_mcp(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser("mcp", help="inspect MCP servers")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True)
    tools = mcp_commands.add_parser(
        "tools", help="list an MCP server's tools: kova mcp tools -- CMD"
    )
    tools.add_argument("server", nargs=argparse.REMAINDER, help="the server command after --")
    mcp_serve = mcp_commands.add_parser(
        "serve",
        help="serve an agent as an MCP tool over stdio (for an MCP client to launch)",
        description="Serve a chat agent as one MCP tool over stdin/stdout: a prompt in, the "
        "agent's answer out, with progress notifications; the client's cancel stops the turn.",
    )
    _add_agent_flags(mcp_serve)
    mcp_serve.add_argument("--name", default="kova", help="the tool's name (default kova)")
    mcp_serve.add_argument(
        "--tools",
        action="store_true",
        help="offer the agent's own tools too, each as an MCP tool (with --demo: its weather "
        "lookup)",
    )


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="chat with an agent in the browser (approve its tool calls from the page)",
        description="Serve a chat agent behind kova's web view; prints the page's address.",
    )
    _add_agent_flags(serve)
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    serve.add_argument(
        "--yes", action="store_true", help="run every tool call without asking on the page"
    )
    serve.add_argument(
        "--token",
        default=os.environ.get("KOVA_SERVE_TOKEN"),
        help="the secret of the page and of the API (Authorization: Bearer TOKEN; at least 16 "
        "characters; default $KOVA_SERVE_TOKEN, else a random one, printed in the page's URL)",
    )
    serve.add_argument(
        "--sessions-db",
        type=Path,
        metavar="FILE",
        help="keep the page's conversations as sessions in this SQLite file: the page lists, "
        "opens and continues them (Sessions, New)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kova`` console script and of ``python -m kova``."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C outside a chat turn (while connecting, listing models): quit quietly.
        print(file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        from .. import __version__

        print(__version__)
        return 0
    if args.command == "demo":
        trio.run(_demo, print)
        return 0
    status = 0
    interrupted = False
    try:
        if args.command == "serve":
            require_extra("ws", "kova serve")
            require_extra("serve", "kova serve")
            try:
                trio.run(_serve_chat, args)
            except* KeyboardInterrupt:
                interrupted = True  # Ctrl-C stops kova serve quietly (exit 130)
        elif args.command == "chat":
            status = _chat(args)
        elif args.command == "models":
            status = trio.run(_models, args)
        elif args.mcp_command == "serve":
            require_extra("mcp", "kova mcp serve")
            require_extra("serve", "kova mcp serve")
            trio.run(_mcp_serve, args)
        else:
            server = [part for part in args.server if part != "--"]
            if not server:
                parser.error("kova mcp tools needs a server command: kova mcp tools -- CMD ...")
            status = trio.run(_mcp_tools, server)
    except* (CliError, MissingExtraError) as mistakes:
        _print_errors(mistakes)
        status = 2
    except* KovaError as failures:
        _print_errors(failures)
        status = 1
    if interrupted:
        print(file=sys.stderr)
        return 130
    return status


def _chat(args: argparse.Namespace) -> int:
    from ._chat import ChatOptions, McpFilter, run_chat

    if args.mcp:
        require_extra("mcp", "kova chat --mcp")
    color = not args.no_color and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if args.session is not None and args.history is not None:
        print("kova chat: give --history FILE or --session NAME, not both", file=sys.stderr)
        return 2

    async def chat() -> int:
        async with _chosen(args) as (selected, demo_tool, system):
            options = ChatOptions(
                selected=selected,
                history_path=args.history,
                session=args.session,
                sessions_path=args.sessions_db,
                mcp_commands=tuple(args.mcp),
                mcp_filter=McpFilter.parse(args.mcp_include, args.mcp_exclude),
                system_prompt=system,
                approve_all=args.yes,
                color=color,
                tools=None if demo_tool is None else (demo_tool,),
            )
            return await run_chat(options)

    return trio.run(chat)


async def _models(args: argparse.Namespace) -> int:
    from ..providers import list_models
    from ._providers import select_provider

    selected = select_provider(args.provider, args.model, args.base_url)
    provider = selected.provider
    async with provider.open():
        models = await list_models(provider)
    for model in sorted(models, key=lambda info: info.id):
        print(model.id if not model.display_name else f"{model.id}\t{model.display_name}")
    return 0


async def _mcp_serve(args: argparse.Namespace) -> None:
    """``kova mcp serve``: one agent (no tools; ``--demo``: the weather model and its tool)
    as an MCP tool over stdio (``--tools``: its own tools too). Nothing but MCP goes to
    stdout."""
    from ..agent import AgentBuilder
    from ..serve import serve_mcp_stdio

    async with _chosen(args) as (selected, demo_tool, system):
        builder = AgentBuilder().provider(selected.provider).name(args.name)
        if demo_tool is not None:
            builder = builder.tool(demo_tool)
        if system:
            builder = builder.system_prompt(system)
        await serve_mcp_stdio(builder.build(), tools=args.tools)


async def _mcp_tools(server: list[str]) -> int:
    from ._mcp import connect_stdio

    async with connect_stdio(server) as client:
        definitions = await client.tools_list()
    for definition in definitions:
        description = " ".join(definition.description.split())
        print(f"{definition.name}\t{description}" if description else definition.name)
    return 0


async def _serve_chat(args: argparse.Namespace) -> None:
    """``kova serve`` with the demo's scripted weather model (``--demo``), or with a real
    provider and the built-in tools confined to the current directory (anything not
    read-only waits for approval on the page)."""
    from ._chat import builtin_tools_for_chat
    from ._serve import serve_chat

    async with _chosen(args) as (selected, demo_tool, system):
        if demo_tool is None:
            print(f"kova serve: {selected.name} {selected.model}")
        else:
            print("kova serve --demo: the model is a SCRIPT on a local fake server (no network)")
        async with _serve_sessions(args) as sessions:
            await serve_chat(
                selected.provider,
                host=args.host,
                port=args.port,
                system_prompt=system,
                tools=builtin_tools_for_chat(Path.cwd()) if demo_tool is None else [demo_tool],
                approve_all=args.yes,
                token=args.token,
                sessions=sessions,
            )


@asynccontextmanager
async def _serve_sessions(args: argparse.Namespace) -> AsyncIterator[SessionStore | None]:
    """``kova serve --sessions-db FILE``: that file's session store, else none."""
    if args.sessions_db is None:
        yield None
        return
    from ..sessions import SqliteSessionStore

    args.sessions_db.parent.mkdir(parents=True, exist_ok=True)
    async with SqliteSessionStore(args.sessions_db) as store:
        print(f"kova serve: sessions in {args.sessions_db}")
        yield store


if __name__ == "__main__":
    sys.exit(main())
