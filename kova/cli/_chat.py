"""``kova chat``: an interactive terminal chat with a real provider.

One task owns the terminal's input: it reads lines in a worker thread and puts them, with
Ctrl-C presses and tool-approval questions, on one channel (:data:`ConsoleItem`). Whoever
is in charge of the conversation at the moment reads that channel: the prompt loop between
turns, the turn's console task during a turn. So nothing is shared between tasks, a line is
never read twice, and Ctrl-C during a turn cancels exactly that turn's cancel scope: the
conversation keeps every earlier message and the turn adds none.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shlex
import signal
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import trio

from .._errors import KovaError, SerializationError
from .._models import (
    InferenceConfig,
    Message,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolAnnotations,
    ToolUse,
    messages_from_json,
    messages_to_json,
)
from .._record import Record
from . import _chat_sessions
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from decimal import Decimal

    from .._models import ContentBlock
    from ..agent import Agent
    from ..sessions import Session
    from ..tools import Tool
    from ._providers import SelectedProvider

__all__ = ["ChatOptions", "builtin_tools_for_chat", "run_chat"]

_HELP = (
    "commands: /tools lists the tools, /model shows the model (/model NAME switches it), "
    "/attach PATH sends a file (PDF, text, image, audio) with your next message, "
    "/clear forgets the conversation, /exit (or Ctrl-D) quits, /help shows this; "
    + _chat_sessions.HELP
)
_RESULT_CHARS = 300
"""A line of a tool's arguments or result is cut here."""
_RESULT_LINES = 20
"""A tool result shows at most this many lines (and says how many more there were)."""


class McpFilter(Record):
    """``--mcp-include`` / ``--mcp-exclude``: which MCP tools the model gets. Each pattern is
    a name or a glob, the server's own (``add``) or prefixed (``mcp__add``)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def parse(cls, include: Sequence[str], exclude: Sequence[str]) -> McpFilter:
        """From the flags' values (each comma-separated, repeatable)."""

        def split(values: Sequence[str]) -> tuple[str, ...]:
            return tuple(
                part.strip() for value in values for part in value.split(",") if part.strip()
            )

        return cls(include=split(include), exclude=split(exclude))

    def keeps(self, names: tuple[str, str], used: set[str]) -> bool:
        """Whether a tool named ``names`` (its own name, its prefixed name) is kept; every
        pattern that matched goes into ``used``."""

        def matching(patterns: tuple[str, ...]) -> bool:
            hits = {p for p in patterns if any(fnmatch.fnmatchcase(n, p) for n in names)}
            used.update(hits)
            return bool(hits)

        included = not self.include or matching(self.include)
        return not matching(self.exclude) and included

    def check_used(self, used: set[str], offered: Sequence[str]) -> None:
        """Raises CliError for a pattern that matched no tool (a typo would otherwise give
        the model the tool it was meant to hide)."""
        for flag, patterns in (("--mcp-include", self.include), ("--mcp-exclude", self.exclude)):
            for pattern in patterns:
                if pattern not in used:
                    raise CliError(
                        f"{flag} {pattern!r} matches no MCP tool "
                        f"(the servers offer: {', '.join(offered) or 'none'})"
                    )


class ChatOptions(Record):
    """What ``kova chat`` was started with."""

    selected: SelectedProvider | None
    """The provider the chat talks to (``kova chat --demo``: the scripted demo model's)."""
    history_path: Path | None = None
    mcp_commands: tuple[str, ...] = ()
    mcp_filter: McpFilter = McpFilter()
    system_prompt: str | None = None
    approve_all: bool = False
    color: bool = False
    tools: tuple[Tool, ...] | None = None
    """The tools besides MCP's (``None``: the built-in tools confined to the current
    directory)."""
    session: str | None = None
    """``--session NAME``: the conversation is that session of :attr:`sessions_path`."""
    sessions_path: Path | None = None


class _Interrupt(Record):
    """Ctrl-C was pressed."""


class _Ask(Record):
    """A tool call waits for the user's yes or no."""

    call: ToolUse
    reply: trio.MemorySendChannel[bool]
    path: tuple[str, ...] = ()
    """The tool calls that led to it (an inner agent's call, ``agent.as_tool()``)."""


ConsoleItem = str | None | _Interrupt | _Ask
"""A line (``None`` at end of input), a Ctrl-C, or an approval question."""


def builtin_tools_for_chat(root: Path) -> Sequence[Tool]:
    """The built-in tools ``kova chat`` and ``kova serve`` give the model: files, search and
    shell, confined to ``root`` (the current directory). Every tool whose annotations do not
    say read-only asks for approval before it runs (at the prompt, or on the page)."""
    from ..tools import ToolPolicy, builtin_tools

    return builtin_tools(ToolPolicy(workspace_root=root))


class _Screen:
    """Writes to the terminal; thinking dimmed when colour is on."""

    def __init__(self, out: TextIO, *, color: bool) -> None:
        self._out = out
        self._color = color
        self._at_line_start = True
        self.prompt: str | None = None
        """The prompt on screen while waiting for the user's line (``None`` otherwise)."""
        self._question: str | None = None
        """An approval question waiting for its answer: it stays the last thing on screen."""
        self._question_shown = False
        """The cursor is right after the question (the user types the answer there)."""

    def write(self, text: str) -> None:
        if not text:
            return
        out = self._out
        if self._question_shown:
            # Other output (another tool's result) goes on lines of its own above the
            # question, which is then asked again below it: never "[y/N] [result] ...".
            out.write("\n")
            self._question_shown = False
        out.write(text)
        self._at_line_start = text.endswith("\n")
        if self._question is not None and self._at_line_start:
            out.write(self._question)
            self._question_shown = True
            self._at_line_start = False
        out.flush()

    def ask(self, question: str) -> None:
        """Show ``question`` on a line of its own and keep it in view until :meth:`answered`."""
        self.write("" if self._at_line_start else "\n")
        self._question = question
        self.write(question)
        self._question_shown = True

    def answered(self) -> None:
        """The user answered the question (their Enter ended its line)."""
        if self._question is not None:
            self._question = None
            self._question_shown = False
            self._at_line_start = True

    def clear(self) -> None:
        """Clear the terminal (Ctrl-L), when it is one."""
        isatty = getattr(self._out, "isatty", None)
        if isatty is not None and isatty():
            self._out.write("\x1b[H\x1b[2J")
            self._out.flush()
            self._at_line_start = True

    def notice(self, label: str, text: str) -> None:
        """``[label] text`` on lines of its own, whatever was being written (a prompt on
        screen is shown again under it)."""
        start = "" if self._at_line_start else "\n"
        self.write(start + _block(label, text) + (self.prompt or ""))

    @property
    def color(self) -> bool:
        return self._color

    def dim(self, text: str) -> None:
        self.write(f"\x1b[2m{text}\x1b[22m" if self._color else text)


async def _read_lines(
    send: trio.MemorySendChannel[ConsoleItem], stdin: TextIO, *, task_status: trio.TaskStatus[None]
) -> None:
    """Own the terminal's input: every line goes on the channel, ``None`` at end of input."""
    async with send:
        task_status.started()
        while True:
            # abandon_on_cancel: a thread blocked in readline cannot be interrupted; at exit
            # it is left behind (trio's worker threads are daemons).
            line = await trio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            if not line:
                await send.send(None)
                return
            await send.send(line.rstrip("\r\n"))


async def _watch_interrupts(
    send: trio.MemorySendChannel[ConsoleItem], *, task_status: trio.TaskStatus[None]
) -> None:
    """Turn Ctrl-C into a channel item instead of KeyboardInterrupt."""
    async with send:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                # WouldBlock: nobody is reading yet; the press is dropped, like a terminal
                # that ignores Ctrl-C while nothing runs.
                with contextlib.suppress(trio.WouldBlock):
                    send.send_nowait(_Interrupt())


def _is_read_only(tool: Tool) -> bool:
    # The Tool protocol does not require annotations; tools that carry them (built-in tools,
    # MCP tools with hints) expose a ToolAnnotations attribute.
    annotations = getattr(tool, "annotations", None)
    return isinstance(annotations, ToolAnnotations) and annotations.is_read_only


def _approval(asks: trio.MemorySendChannel[ConsoleItem], *, approve_all: bool) -> object:
    # By the called tool's own annotations (the pool passes them), not by name: an inner
    # agent's call (agent.as_tool()) is to a tool of that agent, whose name may be one of
    # the chat's read-only tools, or a read-only tool the chat does not know.
    async def approve(
        call: ToolUse, annotations: ToolAnnotations, *, path: tuple[str, ...] = ()
    ) -> bool | str:
        if approve_all or annotations.is_read_only:
            return True
        reply_send, reply_receive = trio.open_memory_channel[bool](1)
        await asks.send(_Ask(call=call, reply=reply_send, path=path))
        async with reply_receive:
            allowed = await reply_receive.receive()
        return True if allowed else "the user denied this tool call"

    return approve


def _save(path: Path, history: list[Message]) -> None:
    # Write then rename, so an interrupted save never leaves half a history behind.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(messages_to_json(history, indent=1), encoding="utf-8")
    os.replace(partial, path)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + "..."


def _money(amount: Decimal) -> str:
    """USD exactly as priced, without trailing zeros or an exponent (``0.0000045``)."""
    return format(amount.normalize(), "f")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _indented(text: str, indent: str, at_line_start: bool) -> str:
    """``text`` with every line it starts indented (the first only ``at_line_start``)."""
    if not indent or not text:
        return text
    shown = (indent if at_line_start else "") + text.replace("\n", "\n" + indent)
    return shown.removesuffix(indent) if text.endswith("\n") else shown


def _block(label: str, text: str) -> str:
    """``[label] text`` keeping the text's line breaks: later lines indented under the
    first, each cut at a width, at most a screenful of them."""
    lines = text.splitlines() or [""]
    shown = [
        line if len(line) <= _RESULT_CHARS else line[:_RESULT_CHARS] + "..."
        for line in lines[:_RESULT_LINES]
    ]
    if len(lines) > _RESULT_LINES:
        shown.append(f"... ({len(lines) - _RESULT_LINES} more lines)")
    head = f"[{label}] "
    return head + ("\n" + " " * len(head)).join(shown) + "\n"


class _Chat:
    def __init__(
        self,
        agent: Agent,
        items: trio.MemoryReceiveChannel[ConsoleItem],
        screen: _Screen,
        options: ChatOptions,
        history: list[Message],
        tools: Sequence[Tool],
    ) -> None:
        self._agent = agent
        self._items = items
        self._screen = screen
        self._options = options
        self._history = history
        self._pending: list[ConsoleItem] = []
        """Lines typed during a turn, answered after it (type-ahead)."""
        self._tools = tools
        self._model: str | None = None
        """The model ``/model NAME`` chose (``None``: the one kova chat started with)."""
        self._attachments: list[ContentBlock] = []
        """Files ``/attach`` read, sent with the next message (kept until a turn succeeds)."""
        self._session_cost: Decimal | None = None
        """What the session's priced turns cost (docs/cost.md); ``None`` before any."""
        self._session: Session | None = None
        """``--session``: the stored conversation turns run on (kova.sessions)."""

    async def _next_item(self) -> ConsoleItem:
        if self._pending:
            return self._pending.pop(0)
        return await self._items.receive()

    async def loop(self) -> None:
        screen = self._screen
        while True:
            screen.write("you> ")
            screen.prompt = "you> "
            try:
                item = await self._next_item()
            finally:
                screen.prompt = None
            if isinstance(item, _Interrupt):
                screen.write("\n(Ctrl-C cancels a running turn; /exit or Ctrl-D quits)\n")
                continue
            if isinstance(item, _Ask):  # cannot happen between turns; never leave it waiting
                item.reply.send_nowait(False)
                continue
            if item is None:
                screen.write("\n")
                return
            text = self._without_form_feeds(item).strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                return
            if text == "/help":
                screen.write(_HELP + "\n")
                continue
            if text.split()[0] in _chat_sessions.COMMANDS:
                if self._session is not None:
                    command = _chat_sessions.session_command
                    self._session = await command(self._session, text, self._history, screen.write)
                    continue
                if text != "/clear":
                    screen.write("(no session: start kova chat with --session NAME)\n")
                    continue
            if text == "/clear":
                self._history.clear()
                self._persist()
                screen.write("(conversation cleared)\n")
                continue
            if text == "/tools":
                screen.write(self._tool_list())
                continue
            if text == "/model" or text.startswith("/model "):
                self._switch_model(text.removeprefix("/model").strip())
                continue
            if text == "/attach" or text.startswith("/attach "):
                await self._attach(text.removeprefix("/attach").strip())
                continue
            if text.startswith("/"):
                screen.write(f"unknown command {text.split()[0]}; {_HELP}\n")
                continue
            await self._turn(text)

    def _without_form_feeds(self, line: str) -> str:
        """A line without the Ctrl-L (form feed) characters a terminal without line editing
        put in it; Ctrl-L clears the screen, as in a shell, and never reaches the model."""
        if "\x0c" not in line:
            return line
        self._screen.clear()
        return line.replace("\x0c", "")

    def _tool_list(self) -> str:
        if not self._tools:
            return "(no tools)\n"
        lines = []
        for tool in self._tools:
            summary = tool.description.strip().split("\n", 1)[0]
            asks = "" if _is_read_only(tool) or self._options.approve_all else "  (asks first)"
            deferred = (
                "  (deferred: found with search_tools)" if getattr(tool, "defer", False) else ""
            )
            lines.append(f"  {tool.name}  {_short(summary)}{asks}{deferred}")
        return _count(len(lines), "tool") + ":\n" + "\n".join(lines) + "\n"

    def _switch_model(self, name: str) -> None:
        selected = self._options.selected
        assert selected is not None
        if name:
            self._model = name
            self._screen.write(f"(model: {name} from the next turn)\n")
            return
        current = self._model or selected.model
        self._screen.write(f"model: {selected.name} / {current}\n")

    async def _attach(self, path: str) -> None:
        from ._attach import AttachError, attachment, describe_attachment

        if not path:
            names = ", ".join(describe_attachment(block) for block in self._attachments)
            self._screen.write(f"(attached: {names or 'nothing'}; /attach PATH adds a file)\n")
            return
        try:
            block = await attachment(path)
        except AttachError as exc:
            self._screen.write(f"error: {exc}\n")
            return
        self._attachments.append(block)
        self._screen.write(
            f"(attached {describe_attachment(block)}: sent with your next message)\n"
        )

    def _persist(self) -> None:
        if self._options.history_path is not None:
            _save(self._options.history_path, self._history)

    async def _turn(self, text: str) -> None:
        screen = self._screen
        user = Message.user([*self._attachments, Text(text=text)] if self._attachments else text)
        working = [*self._history, user]
        new_messages: tuple[Message, ...] | None = None
        failed = False
        with trio.CancelScope() as turn_scope:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._console_during_turn, turn_scope)
                    new_messages = await self._stream(working)
                    nursery.cancel_scope.cancel(reason="turn finished")
            except* KovaError as group:
                # The conversation is kept as it was; the user can try again.
                for error in group.exceptions:
                    screen.write(f"\nerror: {error}\n")
                failed = True
        if failed:
            return
        if turn_scope.cancelled_caught or new_messages is None:
            screen.write("\n[turn stopped: nothing was added to the conversation]\n")
            return
        self._history[:] = [*working, *new_messages]
        self._attachments.clear()
        self._persist()

    async def _stream(self, working: list[Message]) -> tuple[Message, ...] | None:
        from ..agent import (
            ContextCompacted,
            GuardTripped,
            ToolCallFinished,
            ToolCallStarted,
            ToolsFound,
            TurnCompleted,
        )

        screen = self._screen
        new_messages: tuple[Message, ...] | None = None
        cost: Decimal | None = None
        at_line_start = True
        thinking = False  # in a run of thinking: on lines of its own, dimmed
        text_path: tuple[str, ...] = ()  # whose text the current line holds

        def own_line() -> None:
            nonlocal at_line_start, thinking
            if not at_line_start:
                screen.write("\n")
            at_line_start = True
            thinking = False

        config = None if self._model is None else InferenceConfig(model=self._model)
        opened = (
            self._agent.stream(working, config=config)
            if self._session is None  # --session: the turn is appended to it as it completes
            else self._agent.stream(working[-1:], config=config, session=self._session)
        )
        async with opened as events:
            async for event in events:
                # An inner agent's events (agent.as_tool()) are indented, a level per call.
                path = event.path
                indent = "    " * len(path)
                match event:
                    case TextDelta(text=piece):
                        if thinking or path != text_path:
                            own_line()
                        text_path = path
                        screen.write(_indented(piece, indent, at_line_start))
                        at_line_start = piece.endswith("\n")
                    case ThinkingDelta(text=piece):
                        if not thinking or path != text_path:
                            own_line()
                            thinking = True
                            text_path = path
                            if not screen.color:  # dimmed otherwise
                                screen.write(indent + "[thinking] ")
                                at_line_start = False
                        screen.dim(_indented(piece, indent, at_line_start))
                        at_line_start = piece.endswith("\n")
                    case ToolCallStarted(call=call):
                        own_line()
                        arguments = json.dumps(dict(call.input), ensure_ascii=False)
                        screen.write(f"{indent}[tool] {call.name} {_short(arguments)}\n")
                    case ToolCallFinished(result=result):
                        own_line()
                        label = "error" if result.is_error else "result"
                        block = _block(label, result.text)
                        screen.write("".join(indent + line for line in block.splitlines(True)))
                    case ToolsFound(query=query, names=names):
                        own_line()
                        found = ", ".join(names) if names else "nothing"
                        screen.dim(f"{indent}[search_tools {query!r}: {found}]\n")
                    case ContextCompacted():
                        own_line()
                        screen.dim(
                            f"{indent}[context compacted ({event.strategy}): "
                            f"~{event.tokens_before} -> ~{event.tokens_after} tokens]\n"
                        )
                    case GuardTripped(guard=guard, reason=reason, denied=denied):
                        own_line()
                        verdict = "denied a call" if denied else "stopped the turn"
                        screen.dim(f"{indent}[guard {guard} {verdict}: {reason}]\n")
                    case TurnCompleted(response=response):
                        new_messages = response.new_messages
                        cost = response.cost
        own_line()
        if new_messages is not None and cost is not None:
            total = self._session_cost = cost + (self._session_cost or 0)
            screen.dim(f"[cost: ${_money(cost)} this turn, ${_money(total)} this session]\n")
        return new_messages

    async def _console_during_turn(self, turn_scope: trio.CancelScope) -> None:
        """Read the console while a turn runs: Ctrl-C cancels the turn, approval questions
        get the next line, other lines wait for the next prompt."""
        waiting: list[_Ask] = []
        while True:
            item = await self._items.receive()
            if isinstance(item, _Interrupt):
                for ask in waiting:
                    ask.reply.send_nowait(False)
                self._screen.answered()
                turn_scope.cancel(reason="Ctrl-C")
                return
            if isinstance(item, _Ask):
                waiting.append(item)
                if len(waiting) == 1:
                    self._show_ask(item)
                continue
            if waiting:
                ask = waiting.pop(0)
                self._screen.answered()
                if item is not None:
                    item = self._without_form_feeds(item)
                ask.reply.send_nowait(item is not None and item.strip().lower() in ("y", "yes"))
                if waiting:
                    self._show_ask(waiting[0])
                if item is None:
                    self._pending.append(None)
                continue
            self._pending.append(item)

    def _show_ask(self, ask: _Ask) -> None:
        arguments = _short(json.dumps(dict(ask.call.input), ensure_ascii=False))
        indent = "    " * len(ask.path)  # as the inner agent's events are
        self._screen.ask(f"{indent}allow {ask.call.name} {arguments}? [y/N] ")


async def run_chat(
    options: ChatOptions, *, stdin: TextIO | None = None, out: TextIO | None = None
) -> int:
    """Run ``kova chat`` until ``/exit`` or end of input.

    Returns:
        The process exit status.
    """
    from ..agent import AgentBuilder

    screen = _Screen(out or sys.stdout, color=options.color)
    history: list[Message] = []
    session: Session | None = None
    path = options.history_path
    if path is not None and not path.parent.is_dir():
        screen.write(f"kova chat: no directory {path.parent} for the history file\n")
        return 2
    if path is not None and path.exists():
        try:
            history = messages_from_json(path.read_bytes())
        except SerializationError as exc:
            screen.write(f"kova chat: cannot read {path}: {exc}\n")
            return 2
    selected = options.selected
    if selected is None:
        raise ValueError("ChatOptions.selected is needed to run a chat")
    async with AsyncExitStack() as stack:
        if options.session is not None:
            from ..sessions import SqliteSessionStore

            store_path = options.sessions_path or _chat_sessions.default_store_path()
            store_path.parent.mkdir(parents=True, exist_ok=True)
            store = await stack.enter_async_context(SqliteSessionStore(store_path))
            session = store.session(options.session)
            history = await session.load()
            path = store_path
        tools: list[Tool] = list(
            builtin_tools_for_chat(Path.cwd()) if options.tools is None else options.tools
        )
        used: set[str] = set()
        offered: list[str] = []
        for number, command in enumerate(options.mcp_commands, start=1):
            tools.extend(
                await _connect_mcp(
                    stack,
                    command,
                    number,
                    options.mcp_filter,
                    used,
                    offered,
                    lambda message: screen.notice("mcp", message),
                )
            )
        if options.mcp_commands:
            options.mcp_filter.check_used(used, offered)
        send, receive = trio.open_memory_channel[ConsoleItem](0)
        builder = AgentBuilder().provider(selected.provider).tools(*tools)
        builder.approval_handler(
            _approval(send.clone(), approve_all=options.approve_all)  # type: ignore[arg-type]
        )
        if options.system_prompt:
            builder.system_prompt(options.system_prompt)
        agent = builder.build()
        screen.write(
            f"kova chat: {selected.name} / {selected.model}"
            + (f", {_count(len(tools), 'tool')}" if tools else "")
            + (f", session {session.id}" if session is not None else "")
            + (f", resumed {len(history)} messages from {path}" if history else "")
            + ". /help for commands.\n"
        )
        async with agent, trio.open_nursery() as nursery:
            await nursery.start(_read_lines, send.clone(), stdin or sys.stdin)
            await nursery.start(_watch_interrupts, send.clone())
            send.close()
            async with receive:
                chat = _Chat(agent, receive, screen, options, history, tools)
                chat._session = session
                await chat.loop()
            nursery.cancel_scope.cancel(reason="chat finished")
    return 0


async def _connect_mcp(
    stack: AsyncExitStack,
    command: str,
    number: int,
    keep: McpFilter,
    used: set[str],
    offered: list[str],
    on_lost: Callable[[str], object],
) -> list[Tool]:
    """Start one ``--mcp`` server (``"CMD ARGS"`` or ``"PREFIX=CMD ARGS"``) and list the tools
    ``keep`` lets through (``used`` collects the patterns that matched, ``offered`` every
    tool the server has). ``on_lost`` is told when the server ends mid-chat."""
    from ..mcp import mcp_tools
    from ..mcp._tool import check_prefix
    from ._mcp import connect_stdio

    prefix = f"mcp{number}" if number > 1 else "mcp"
    name, separator, rest = command.partition("=")
    if separator and name and " " not in name:
        check_prefix(name)
        prefix, command = name, rest
    argv = shlex.split(command)
    if not argv:
        raise ValueError(f"--mcp needs a command, got {command!r}")
    client = await stack.enter_async_context(connect_stdio(argv, name=prefix, on_lost=on_lost))
    found = await mcp_tools(client, prefix)
    offered.extend(tool.name for tool in found)
    return [tool for tool in found if keep.keeps((tool.remote_name, tool.name), used)]
