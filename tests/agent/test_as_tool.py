"""Agents as tools (``agent.as_tool()``): one agent calling another, on fake servers, with
results, usage, limits, failures, streaming paths, approvals and the agents' lifecycle carried
through every level."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic
import pytest
import trio

from kova import Message, Secret, TextDelta, ToolAnnotations, ToolResult, ToolUse, Usage
from kova.agent import DEFER as DEFER_
from kova.agent import (
    Agent,
    AgentBuilder,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
)
from kova.errors import BuildError, UsageLimitExceeded
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    ScriptRequest,
    open_openai_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import ToolContext, tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from kova.testing import FakeOpenAiServer, Reply

USAGE = Usage(input_tokens=10, output_tokens=5)
KEY = Secret("a test key, 32 characters long..")


def provider(server: FakeOpenAiServer) -> OpenAiCompatibleProvider:
    return OpenAiCompatibleProvider(
        OpenAiConfig(model="gpt-fake", api_key="k", base_url=server.base_url)
    )


def last_user_text(request: ScriptRequest) -> str:
    return next(m.text for m in reversed(request.messages) if m.role.value == "user")


def tool_results(request: ScriptRequest) -> list[ToolResult]:
    last = request.messages[-1]
    return [block for block in last.content if isinstance(block, ToolResult)]


def researcher_script(request: ScriptRequest) -> Reply:
    """Answers every question with facts about it (one model call per inner turn)."""
    return reply_text(f"facts about {last_user_text(request)}", usage=USAGE)


def delegating(
    *calls: tuple[str, dict[str, Any]], answer: Callable[[list[ToolResult]], str] | None = None
) -> Callable[[ScriptRequest], Reply]:
    """A model that first makes ``calls`` (in one step), then answers with their results."""

    def script(request: ScriptRequest) -> Reply:
        results = tool_results(request)
        if not results:
            return reply_tool_calls(*calls, usage=USAGE)
        if answer is not None:
            return reply_text(answer(results), usage=USAGE)
        return reply_text(" | ".join(result.text for result in results), usage=USAGE)

    return script


def build(server: FakeOpenAiServer, name: str, *tools: Any, **options: Any) -> Agent:
    builder = AgentBuilder().provider(provider(server)).name(name).tools(*tools)
    if "approval" in options:
        builder = builder.approval_handler(options["approval"])
    if "limits" in options:
        builder = builder.usage_limits(**options["limits"])
    if "system" in options:
        builder = builder.system_prompt(options["system"])
    return builder.build()


@pytest.fixture
async def servers() -> AsyncIterator[Callable[[Any], Any]]:
    """Opens fake OpenAI servers (one per agent) for the test's duration."""
    async with trio.open_nursery() as nursery:
        opened: list[FakeOpenAiServer] = []

        async def open_one(script: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            async with open_openai_server(script) as server:
                task_status.started(server)
                await trio.sleep_forever()

        async def start(script: Any) -> FakeOpenAiServer:
            server: FakeOpenAiServer = await nursery.start(open_one, script)
            opened.append(server)
            return server

        yield start
        nursery.cancel_scope.cancel()


# -- the tool itself ----------------------------------------------------------------------


async def test_as_tool_schema_name_and_description() -> None:
    agent = (
        AgentBuilder()
        .provider(provider_stub())
        .name("researcher")
        .system_prompt("Finds facts.")
        .build()
    )
    made = agent.as_tool()
    assert made.name == "researcher"
    assert made.description == "Finds facts."
    assert made.parameters["required"] == ["input"]
    named = agent.as_tool("lookup", "Looks things up.")
    assert (named.name, named.description) == ("lookup", "Looks things up.")

    class Question(pydantic.BaseModel):
        topic: str
        depth: int = 1

    typed = agent.as_tool(input=Question)
    assert typed.parameters["properties"]["topic"]["type"] == "string"
    assert typed.prompt({"topic": "owls"}) == '{"topic":"owls","depth":1}'


async def test_as_tool_rejects_bad_options() -> None:
    agent = AgentBuilder().provider(provider_stub()).build()
    with pytest.raises(BuildError, match="as_tool name"):
        agent.as_tool("two words")
    with pytest.raises(TypeError, match="as_tool input must be str or a pydantic model class"):
        agent.as_tool("x", input=int)
    with pytest.raises(TypeError, match="as_tool history"):
        agent.as_tool("x", history="not messages")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="as_tool description"):
        agent.as_tool("x", 3)  # type: ignore[arg-type]


def provider_stub() -> OpenAiCompatibleProvider:
    return OpenAiCompatibleProvider(
        OpenAiConfig(model="gpt-fake", api_key="k", base_url="http://127.0.0.1:9")
    )


# -- two and three levels -----------------------------------------------------------------


async def test_two_levels_with_parallel_inner_turns(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(
        delegating(("researcher", {"input": "owls"}), ("researcher", {"input": "bats"}))
    )
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool())
    async with writer:
        assert researcher.is_open  # opened by the writer
        response = await writer.run("Write about night animals.")
    assert not researcher.is_open  # and closed with it
    assert response.text == "facts about owls | facts about bats"
    assert len(research.requests) == 2
    # Usage: the writer's two calls and the researcher's two (one per inner turn).
    assert response.usage == Usage(input_tokens=40, output_tokens=20)
    assert dict(response.usage_by_agent) == {
        "writer": Usage(input_tokens=20, output_tokens=10),
        "researcher": Usage(input_tokens=20, output_tokens=10),
    }
    assert response.llm_calls == 2


async def test_three_levels_with_parallel_inner_agents(servers: Any) -> None:
    research = await servers(researcher_script)
    editing = await servers(
        delegating(("researcher", {"input": "owls"}), ("checker", {"input": "owls"}))
    )
    writing = await servers(
        delegating(("editor", {"input": "draft 1"}), ("editor", {"input": "draft 2"}))
    )
    researcher = build(research, "researcher")
    checker = build(research, "checker")
    editor = build(editing, "editor", researcher.as_tool(), checker.as_tool())
    writer = build(writing, "writer", editor.as_tool())
    async with writer:
        response = await writer.run("Write.")
    assert response.text == (
        "facts about owls | facts about owls | facts about owls | facts about owls"
    )
    # 2 writer calls, 2 editor turns of 2 calls, 4 inner turns of one call each.
    assert dict(response.usage_by_agent) == {
        "writer": Usage(input_tokens=20, output_tokens=10),
        "editor": Usage(input_tokens=40, output_tokens=20),
        "researcher": Usage(input_tokens=20, output_tokens=10),
        "checker": Usage(input_tokens=20, output_tokens=10),
    }
    assert response.usage == Usage(input_tokens=100, output_tokens=50)


async def test_an_agent_already_open_is_used_as_it_is(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher")
    async with researcher:
        writer = build(writing, "writer", researcher.as_tool())
        async with writer:
            response = await writer.run("Write.")
        assert researcher.is_open  # the writer did not close what it did not open
        assert (await researcher.run("moths")).text == "facts about moths"
    assert response.text == "facts about owls"


async def test_shared_runtime(servers: Any) -> None:
    from kova.actors import open_runtime

    research = await servers(researcher_script)
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    async with open_runtime() as runtime:
        researcher = (
            AgentBuilder().provider(provider(research)).name("researcher").runtime(runtime).build()
        )
        writer = (
            AgentBuilder()
            .provider(provider(writing))
            .name("writer")
            .runtime(runtime)
            .tool(researcher.as_tool())
            .build()
        )
        async with writer:
            assert (await writer.run("Write.")).text == "facts about owls"
        assert not researcher.is_open


async def test_input_model_and_history(servers: Any) -> None:
    class Question(pydantic.BaseModel):
        topic: str

    seen: list[tuple[Message, ...]] = []

    def inner(request: ScriptRequest) -> Reply:
        seen.append(request.messages)
        return reply_text("ok", usage=USAGE)

    research = await servers(inner)
    writing = await servers(delegating(("ask", {"topic": "owls"})))

    def remembered(ctx: ToolContext[str]) -> list[Message]:
        return [Message.user(f"I am {ctx.deps}."), Message.assistant("Noted.")]

    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool("ask", input=Question, history=remembered))
    async with writer:
        await writer.run("Write.", deps="Ada")
    (messages,) = seen
    assert [m.text for m in messages] == ["I am Ada.", "Noted.", '{"topic":"owls"}']


# -- failures are in-band -----------------------------------------------------------------


async def test_inner_failure_is_an_error_result_for_the_outer_model(servers: Any) -> None:
    research = await servers([ErrorReply(status_code=400, message="bad request")])
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool())
    async with writer:
        response = await writer.run("Write.")
    tool_message = response.new_messages[1]
    (result,) = [b for b in tool_message.content if isinstance(b, ToolResult)]
    assert result.is_error
    assert result.text.startswith("agent 'researcher' failed: ")
    assert "bad request" in result.text
    assert response.text == result.text  # the outer model went on with it


async def test_inner_usage_limit_of_its_own_is_in_band(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher", limits={"requests": 0})
    writer = build(writing, "writer", researcher.as_tool())
    async with writer:
        response = await writer.run("Write.")
    assert "UsageLimitExceeded" in response.text
    assert len(research.requests) == 0


# -- usage limits count the inner turns ---------------------------------------------------


async def test_outer_request_limit_counts_inner_calls(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(
        delegating(("researcher", {"input": "owls"}), ("researcher", {"input": "bats"}))
    )
    researcher = build(research, "researcher")
    # The writer's first call and one inner call fit; the second inner call does not.
    writer = build(writing, "writer", researcher.as_tool(), limits={"requests": 2})
    async with writer:
        with pytest.raises(UsageLimitExceeded) as raised:
            await writer.run("Write.")
    assert raised.value.limit == "requests"
    assert len(research.requests) == 1
    assert len(writing.requests) == 1


async def test_outer_token_limit_counts_inner_usage(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool(), limits={"output_tokens": 9})
    async with writer:
        with pytest.raises(UsageLimitExceeded) as raised:
            await writer.run("Write.")
    assert (raised.value.limit, raised.value.figure) == ("output_tokens", 10)
    assert len(writing.requests) == 1  # the writer never got to answer


async def test_outer_limits_count_across_three_levels(servers: Any) -> None:
    research = await servers(researcher_script)
    editing = await servers(delegating(("researcher", {"input": "owls"})))
    writing = await servers(delegating(("editor", {"input": "draft"})))
    researcher = build(research, "researcher")
    editor = build(editing, "editor", researcher.as_tool())
    writer = build(writing, "writer", editor.as_tool(), limits={"tool_calls": 1})
    async with writer:
        with pytest.raises(UsageLimitExceeded) as raised:
            await writer.run("Write.")
    assert raised.value.limit == "tool_calls"
    assert len(research.requests) == 0  # the editor's tool step was refused


# -- streaming: paths and order -----------------------------------------------------------


def describe(event: object) -> tuple[str, tuple[str, ...], str]:
    path: tuple[str, ...] = getattr(event, "path", ())
    if isinstance(event, ToolCallStarted):
        return ("started", path, event.call.name)
    if isinstance(event, ToolCallFinished):
        return ("finished", path, event.result.text)
    if isinstance(event, TurnCompleted):
        return ("completed", path, event.response.text)
    return (type(event).__name__, path, getattr(event, "text", ""))


async def test_stream_carries_inner_events_with_their_path(servers: Any) -> None:
    research = await servers(researcher_script)
    editing = await servers(delegating(("researcher", {"input": "owls"})))
    writing = await servers(delegating(("editor", {"input": "draft"})))
    researcher = build(research, "researcher")
    editor = build(editing, "editor", researcher.as_tool())
    writer = build(writing, "writer", editor.as_tool())
    async with writer, writer.stream("Write.") as events:
        seen = [describe(event) async for event in events]
    text = {
        path: "".join(t for kind, p, t in seen if kind == "TextDelta" and p == path)
        for path in {p for _, p, _ in seen}
    }
    assert text[("call_1", "call_1")] == "facts about owls"
    structure = [item for item in seen if item[0] not in ("TextDelta", "ToolCallDelta")]
    # The calls' arguments stream before each call starts, at the caller's depth.
    deltas = [item[1] for item in seen if item[0] == "ToolCallDelta"]
    assert () in deltas
    assert ("call_1",) in deltas
    assert structure == [
        ("started", (), "editor"),
        ("started", ("call_1",), "researcher"),
        ("finished", ("call_1",), "facts about owls"),
        ("finished", (), "facts about owls"),
        ("completed", (), "facts about owls"),
    ]
    # Every inner text delta comes between its call's started and finished events.
    first = seen.index(("started", ("call_1",), "researcher"))
    last = seen.index(("finished", ("call_1",), "facts about owls"))
    inner = [i for i, item in enumerate(seen) if item[1] == ("call_1", "call_1")]
    assert inner
    assert first < min(inner)
    assert max(inner) < last
    # The outer agent's own events carry the class default: no copy.
    own = [e for e in seen if e[0] == "TextDelta" and e[1] == ()]
    assert own


async def test_parallel_inner_streams_each_keep_their_path(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(
        delegating(("researcher", {"input": "owls"}), ("researcher", {"input": "bats"}))
    )
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool())
    async with writer, writer.stream("Write.") as events:
        seen = [describe(event) async for event in events]
    by_path: dict[tuple[str, ...], str] = {}
    for kind, path, text in seen:
        if kind == "TextDelta" and path:
            by_path[path] = by_path.get(path, "") + text
    assert by_path == {("call_1",): "facts about owls", ("call_2",): "facts about bats"}
    assert seen[-1] == ("completed", (), "facts about owls | facts about bats")


# -- approvals reach the outer handler ----------------------------------------------------

REMOVED: list[str] = []


@tool
def remove(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    REMOVED.append(path)
    return f"removed {path}"


async def test_inner_calls_ask_the_outer_approval_handler_with_their_path(servers: Any) -> None:
    REMOVED.clear()
    asked: list[tuple[str, tuple[str, ...]]] = []

    def approve(call: ToolUse, *, path: tuple[str, ...]) -> bool | str:
        asked.append((call.name, path))
        return call.input.get("path") != "/keep" or "not that one"

    cleaning = await servers(
        delegating(("remove", {"path": "/tmp/a"}), ("remove", {"path": "/keep"}))
    )
    writing = await servers(delegating(("cleaner", {"input": "tidy"})))
    cleaner = build(cleaning, "cleaner", remove)
    writer = build(writing, "writer", cleaner.as_tool(), approval=approve)
    async with writer:
        response = await writer.run("Tidy up.")
    assert sorted(asked) == [
        ("cleaner", ()),
        ("remove", ("call_1",)),
        ("remove", ("call_1",)),
    ]
    assert REMOVED == ["/tmp/a"]
    assert response.text == "removed /tmp/a | tool call denied: not that one"


async def test_an_inner_agent_with_its_own_handler_keeps_it(servers: Any) -> None:
    REMOVED.clear()
    outer_asked: list[str] = []
    cleaning = await servers(delegating(("remove", {"path": "/tmp/a"})))
    writing = await servers(delegating(("cleaner", {"input": "tidy"})))
    cleaner = build(cleaning, "cleaner", remove, approval=lambda call: "inner says no")
    writer = build(
        writing,
        "writer",
        cleaner.as_tool(),
        approval=lambda call: outer_asked.append(call.name) or True,
    )
    async with writer:
        response = await writer.run("Tidy up.")
    assert outer_asked == ["cleaner"]
    assert REMOVED == []
    assert response.text == "tool call denied: inner says no"


# -- cancellation -------------------------------------------------------------------------


def running_tasks() -> list[str]:
    """The names of every task of this trio run but the fake servers' (the test's own, the
    agents' actors, and whatever a turn started)."""
    names: list[str] = []
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        if "open_one" in task.name:  # a fake server (the servers fixture) and its connections
            continue
        names.append(task.name)
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return sorted(names)


def client_sockets(port: int) -> int:
    """This process's open TCP connections to ``port`` (client side)."""
    import psutil

    return sum(
        1
        for connection in psutil.Process().net_connections(kind="tcp")
        if connection.raddr and connection.raddr[1] == port
    )


@pytest.mark.parametrize("how", ["leave the stream", "cancel scope", "cancel token"])
async def test_cancelling_the_outer_turn_mid_inner_stream_stops_everything(
    servers: Any, how: str
) -> None:
    from kova.agent import CancelToken
    from kova.errors import TurnCancelled
    from kova.testing import StreamReply

    held = StreamReply(
        response=reply_text("an answer that never ends"), chunk_chars=8, hold_after=2
    )
    research = await servers(lambda request: held)
    writing = await servers(
        delegating(("researcher", {"input": "owls"}), ("researcher", {"input": "bats"}))
    )
    port = int(research.base_url.rsplit(":", 1)[1].split("/")[0])
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool())
    async with writer:
        before = running_tasks()
        inner_text: list[str] = []
        token = CancelToken()
        with trio.move_on_after(5) as timeout:
            if how == "leave the stream":
                async with writer.stream("Write.") as events:
                    async for event in events:
                        if isinstance(event, TextDelta) and event.path:
                            inner_text.append(event.text)
                            if len(inner_text) == 4:  # both inner streams are held now
                                break
            elif how == "cancel scope":
                with trio.CancelScope() as scope:
                    async with writer.stream("Write.") as events:
                        async for event in events:
                            if isinstance(event, TextDelta) and event.path:
                                inner_text.append(event.text)
                                if len(inner_text) == 4:
                                    scope.cancel()
            else:
                with pytest.raises(TurnCancelled):
                    async with writer.stream("Write.", cancel=token) as events:
                        async for event in events:
                            if isinstance(event, TextDelta) and event.path:
                                inner_text.append(event.text)
                                if len(inner_text) == 4:
                                    token.cancel()
        assert not timeout.cancelled_caught
        assert len(research.requests) == 2
        assert sorted(inner_text) == ["an answe", "an answe", "r that n", "r that n"]
        # Nothing the turn started is left: no task, no connection to the held model.
        assert running_tasks() == before
        assert client_sockets(port) == 0
        assert researcher.is_open  # the agents themselves are still there
        assert (await writer.run("Write.")).text  # and the writer still works


# -- telemetry ----------------------------------------------------------------------------


async def test_spans_nest_invoke_agent_inside_execute_tool(servers: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kova.telemetry import TelemetryHub
    from kova.telemetry.otel import OtelSubscriber

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    hub = TelemetryHub()
    hub.subscribe(OtelSubscriber(tracer_provider=tracer_provider))

    research = await servers(researcher_script)
    editing = await servers(delegating(("researcher", {"input": "owls"})))
    writing = await servers(delegating(("editor", {"input": "draft"})))

    def observed(server: FakeOpenAiServer, name: str, *tools: Any) -> Agent:
        return (
            AgentBuilder()
            .provider(provider(server))
            .name(name)
            .tools(*tools)
            .telemetry(hub)
            .build()
        )

    researcher = observed(research, "researcher")
    editor = observed(editing, "editor", researcher.as_tool())
    writer = observed(writing, "writer", editor.as_tool())
    async with writer:
        await writer.run("Write.")
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    def tree(span: Any, depth: int = 0) -> list[str]:
        lines = ["  " * depth + span.name]
        children = [
            s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id
        ]
        for child in sorted(children, key=lambda s: s.start_time):
            lines.extend(tree(child, depth + 1))
        return lines

    (root,) = [span for span in spans if span.parent is None or span.parent.span_id not in by_id]
    assert tree(root) == [
        "invoke_agent writer",
        "  chat gpt-fake",
        "  execute_tool editor",
        "    invoke_agent editor",
        "      chat gpt-fake",
        "      execute_tool researcher",
        "        invoke_agent researcher",
        "          chat gpt-fake",
        "      chat gpt-fake",
        "  chat gpt-fake",
    ]
    assert len({span.context.trace_id for span in spans}) == 1


# -- an inner deferral pauses the outer turn ----------------------------------------------


def cleaner_script(request: ScriptRequest) -> Reply:
    results = tool_results(request)
    if not results:
        return reply_tool_calls(("remove", {"path": "/tmp/a"}), usage=USAGE)
    return reply_text("cleaner: " + results[0].text, usage=USAGE)


async def paused_writer(servers: Any) -> tuple[Agent, Any, Any]:
    cleaning = await servers(cleaner_script)
    writing = await servers(delegating(("cleaner", {"input": "tidy"})))
    return (pausing_agents(cleaning.base_url, writing.base_url), cleaning, writing)


def pausing_agents(cleaning_url: str, writing_url: str) -> Agent:
    """The writer, whose cleaner defers its destructive calls to a person."""

    def at(url: str) -> OpenAiCompatibleProvider:
        return OpenAiCompatibleProvider(OpenAiConfig(model="gpt-fake", api_key="k", base_url=url))

    cleaner = (
        AgentBuilder()
        .provider(at(cleaning_url))
        .name("cleaner")
        .tool(remove)
        .defer_approvals()
        .build()
    )
    return (
        AgentBuilder()
        .provider(at(writing_url))
        .name("writer")
        .tool(cleaner.as_tool())
        .approval_key(KEY)
        .build()
    )


async def test_an_inner_deferral_pauses_the_outer_turn_and_resume_continues_it(
    servers: Any,
) -> None:
    REMOVED.clear()
    writer, cleaning, writing = await paused_writer(servers)
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history)
        assert paused.pending is not None
        (call,) = paused.pending.calls
        assert (call.name, call.arguments, call.path) == ("remove", {"path": "/tmp/a"}, ("call_1",))
        assert REMOVED == []
        assert len(writing.requests) == 1  # the writer waits too
        assert paused.usage_by_agent["cleaner"] == USAGE
        decided = paused.pending.approve(call.id)
        done = await writer.resume([*history, *paused.new_messages], decided)
    assert REMOVED == ["/tmp/a"]
    assert done.pending is None
    assert done.text == "cleaner: removed /tmp/a"
    assert len(cleaning.requests) == 2
    assert dict(done.usage_by_agent) == {"writer": USAGE, "cleaner": USAGE}


async def test_an_inner_deferral_streams_and_resumes_streamed(servers: Any) -> None:
    REMOVED.clear()
    writer, _cleaning, _writing = await paused_writer(servers)
    history = [Message.user("Tidy up.")]
    async with writer:
        async with writer.stream(history) as events:
            first = [event async for event in events]
        paused = first[-1].response
        assert [(type(e).__name__, e.path, e.call.name) for e in first if hasattr(e, "call")] == [
            ("ToolCallStarted", (), "cleaner"),
            ("ToolCallStarted", ("call_1",), "remove"),
            ("ToolCallDeferred", ("call_1",), "remove"),
            ("ToolCallDeferred", (), "cleaner"),
        ]
        decided = paused.pending.deny(paused.pending.calls[0], "keep it")
        async with writer.stream([*history, *paused.new_messages], resume=decided) as events:
            second = [describe(event) async for event in events]
    assert [item for item in second if item[0] != "TextDelta"] == [
        ("started", (), "cleaner"),
        ("started", ("call_1",), "remove"),
        ("finished", ("call_1",), "tool call denied: keep it"),
        ("finished", (), "cleaner: tool call denied: keep it"),
        ("completed", (), "cleaner: tool call denied: keep it"),
    ]
    assert REMOVED == []


async def test_an_inner_deferral_resumes_from_json_in_another_process(
    servers: Any, tmp_path: Any
) -> None:
    import sys
    import textwrap

    from kova import messages_to_json

    REMOVED.clear()
    writer, cleaning, writing = await paused_writer(servers)
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history)
    assert paused.pending is not None
    (tmp_path / "history.json").write_text(messages_to_json([*history, *paused.new_messages]))
    (tmp_path / "pending.json").write_text(paused.pending.approve("call_1").to_json())
    code = textwrap.dedent(
        f"""
        import sys, trio
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from kova import messages_from_json
        from kova.agent import PendingApprovals
        import test_as_tool as t

        async def main():
            folder = {str(tmp_path)!r}
            history = messages_from_json(open(folder + "/history.json").read())
            pending = PendingApprovals.from_json(open(folder + "/pending.json").read())
            writer = t.pausing_agents({cleaning.base_url!r}, {writing.base_url!r})
            async with writer:
                done = await writer.resume(history, pending)
            print(done.text)
            print(t.REMOVED)

        trio.run(main)
        """
    )
    result = await trio.run_process(
        [sys.executable, "-c", code], capture_stdout=True, capture_stderr=True, check=False
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert result.stdout.decode().splitlines() == ["cleaner: removed /tmp/a", "['/tmp/a']"]
    assert REMOVED == []  # it ran in the other process
    assert len(cleaning.requests) == 2


async def test_a_resumed_inner_deferral_fails_closed(servers: Any) -> None:
    import json

    from kova.agent import PendingApprovals
    from kova.errors import ApprovalMismatchError

    REMOVED.clear()
    writer, _cleaning, _writing = await paused_writer(servers)
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history)
        assert paused.pending is not None
        whole = [*history, *paused.new_messages]
        # Undecided: refused before anything runs.
        with pytest.raises(ApprovalMismatchError, match="no decision for 'call_1' \\(remove\\)"):
            await writer.resume(whole, paused.pending)

        # Each change is refused by the signature; and, were it signed again with the key,
        # by the structural check behind it.
        def changed(edit: Callable[[dict[str, Any]], None]) -> tuple[Any, Any]:
            stored = json.loads(paused.pending.approve("call_1").to_json())  # type: ignore[union-attr]
            edit(stored)
            forged = PendingApprovals.from_json(json.dumps(stored))
            return forged, forged.sign(KEY)

        def arguments(stored: dict[str, Any]) -> None:
            stored["inner"]["call_1"]["pending"]["calls"][0]["arguments"] = {"path": "/"}
            stored["calls"][0]["arguments"] = {"path": "/"}

        def outer_call(stored: dict[str, Any]) -> None:
            stored["inner"]["call_1"]["fingerprint"] = "0" * 64

        def inner_history(stored: dict[str, Any]) -> None:
            stored["inner"]["call_1"]["history"] = stored["inner"]["call_1"]["history"][:1]

        for edit, message in [
            (arguments, "fingerprint"),
            (outer_call, "inner turn of call 'call_1'"),
            (inner_history, "history of the inner turn"),
        ]:
            forged, resigned = changed(edit)
            with pytest.raises(ApprovalMismatchError, match="signature"):
                await writer.resume(whole, forged)
            with pytest.raises(ApprovalMismatchError, match=message):
                await writer.resume(whole, resigned)
    assert REMOVED == []


async def test_a_journaled_outer_turn_whose_inner_agent_defers(servers: Any, tmp_path: Any) -> None:
    """The journal with an agent used as a tool that defers: the journaled outer turn pauses
    with the inner call, running it again answers with the recorded pause (nothing sent),
    agent.resume(..., journal=, turn_id=) continues the inner turn, and once it finished the
    journal answers both resume and run with the recorded response."""
    from kova.durable import SqliteJournal
    from kova.errors import ApprovalMismatchError

    REMOVED.clear()
    writer, cleaning, writing = await paused_writer(servers)
    journal = SqliteJournal(tmp_path / "turns.db")
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history, journal=journal, turn_id="t")
        assert paused.pending is not None
        (call,) = paused.pending.calls
        assert (call.name, call.path) == ("remove", ("call_1",))
        again = await writer.run(history, journal=journal, turn_id="t")
        assert again.pending == paused.pending  # the recorded pause, inner state included
        assert (len(writing.requests), len(cleaning.requests)) == (1, 1)  # nothing sent again
        whole = [*history, *paused.new_messages]
        with pytest.raises(ApprovalMismatchError):  # undecided: before anything runs
            await writer.resume(whole, paused.pending, journal=journal, turn_id="t")
        decided = paused.pending.approve(call.id)
        done = await writer.resume(whole, decided, journal=journal, turn_id="t")
        assert done.pending is None
        assert done.text == "cleaner: removed /tmp/a"
        assert dict(done.usage_by_agent) == {"writer": USAGE, "cleaner": USAGE}
        # Finished: the recorded response, nothing run or sent.
        assert await writer.resume(whole, decided, journal=journal, turn_id="t") == done
        assert await writer.run(whole, journal=journal, turn_id="t") == done
    assert REMOVED == ["/tmp/a"]
    assert (len(writing.requests), len(cleaning.requests)) == (2, 2)
    record = await journal.load("t")
    assert record is not None
    assert set(record.results) == {"call_1"}  # the outer call that ran the inner agent


async def test_ids_shared_by_two_agents_are_told_apart(servers: Any) -> None:
    REMOVED.clear()
    cleaning = await servers(cleaner_script)
    writing = await servers(
        delegating(("remove", {"path": "/outer"}), ("cleaner", {"input": "tidy"}))
    )

    def at(server: Any) -> OpenAiCompatibleProvider:
        return provider(server)

    cleaner = AgentBuilder().provider(at(cleaning)).name("cleaner").tool(remove).build()
    writer = (
        AgentBuilder()
        .provider(at(writing))
        .name("writer")
        .tools(remove, cleaner.as_tool())
        .approval_handler(lambda call, *, path: DEFER_ if call.name == "remove" else True)
        .build()
    )
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history)
        pending = paused.pending
        assert pending is not None
        assert [(c.id, c.path) for c in pending.calls] == [("call_1", ()), ("call_1", ("call_2",))]
        from kova.errors import ApprovalMismatchError

        with pytest.raises(ApprovalMismatchError, match="2 pending calls have id 'call_1'"):
            pending.approve("call_1")
        outer_call, inner_call = pending.calls
        decided = pending.deny(outer_call, "not there").approve(inner_call)
        done = await writer.resume([*history, *paused.new_messages], decided)
    assert REMOVED == ["/tmp/a"]
    assert done.text == "tool call denied: not there | cleaner: removed /tmp/a"


# -- kova chat and the web view indent nested events --------------------------------------


async def test_kova_chat_indents_an_inner_agents_events(servers: Any) -> None:
    import io

    from kova.cli._chat import ChatOptions, _Chat, _Screen

    research = await servers(lambda request: reply_text("line one\nline two", usage=USAGE))
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool())
    out = io.StringIO()
    send, receive = trio.open_memory_channel[Any](0)
    async with writer, send, receive:
        chat = _Chat(writer, receive, _Screen(out, color=False), ChatOptions(selected=None), [], [])
        await chat._stream([Message.user("Write.")])
    assert out.getvalue() == (
        '[tool] researcher {"input": "owls"}\n'
        "    line one\n"
        "    line two\n"
        "[result] line one\n"
        "         line two\n"
        "line one\n"
        "line two\n"
    )


# -- structured output --------------------------------------------------------------------


async def test_structured_output_is_the_result_re_asked_while_invalid(servers: Any) -> None:
    class Facts(pydantic.BaseModel):
        topic: str
        facts: list[str]

    answers = iter(['{"topic": "owls"}', '{"topic": "owls", "facts": ["they hoot"]}'])
    formats: list[object] = []

    def inner(request: ScriptRequest) -> Reply:
        formats.append(request.config.response_format)
        return reply_text(next(answers), usage=USAGE)

    research = await servers(inner)
    seen: list[list[ToolResult]] = []

    def outer(request: ScriptRequest) -> Reply:
        results = tool_results(request)
        if not results:
            return reply_tool_calls(("researcher", {"input": "owls"}), usage=USAGE)
        seen.append(results)
        return reply_text("done", usage=USAGE)

    writing = await servers(outer)
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool(output=Facts))
    async with writer:
        response = await writer.run("Write.")
    ((sent,),) = seen  # what the writer's model read: the JSON text
    assert sent.text == '{"topic": "owls", "facts": ["they hoot"]}'
    (result,) = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert not result.is_error
    assert result.structured == {"topic": "owls", "facts": ["they hoot"]}  # for the host
    assert len(formats) == 2  # one re-ask after the invalid answer
    assert all(getattr(f, "name", None) == "Facts" for f in formats)
    assert response.usage_by_agent["researcher"] == USAGE + USAGE


async def test_structured_output_that_stays_invalid_is_an_error_result(servers: Any) -> None:
    class Facts(pydantic.BaseModel):
        facts: list[str]

    research = await servers(lambda request: reply_text("not json", usage=USAGE))
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    researcher = build(research, "researcher")
    writer = build(writing, "writer", researcher.as_tool(output=Facts))
    async with writer:
        response = await writer.run("Write.")
    assert response.text.startswith("agent 'researcher' failed: StructuredOutputError")
    with pytest.raises(TypeError, match="as_tool output"):
        researcher.as_tool(output=3)  # type: ignore[arg-type]


async def test_a_resumed_structured_inner_turn_is_re_asked_while_invalid(servers: Any) -> None:
    class Tidied(pydantic.BaseModel):
        removed: list[str]

    def cleaner(request: ScriptRequest) -> Reply:
        if tool_results(request):  # after the approved call: an answer that is not JSON
            return reply_text("all tidy!", usage=USAGE)
        if last_user_text(request) != "tidy":  # the re-ask names the problem
            return reply_text('{"removed": ["/tmp/a"]}', usage=USAGE)
        return reply_tool_calls(("remove", {"path": "/tmp/a"}), usage=USAGE)

    REMOVED.clear()
    cleaning = await servers(cleaner)
    writing = await servers(delegating(("cleaner", {"input": "tidy"})))
    builder = AgentBuilder().provider(provider(cleaning)).name("cleaner").tool(remove)
    inner = builder.defer_approvals().build()
    writer = build(writing, "writer", inner.as_tool(output=Tidied))
    history = [Message.user("Tidy up.")]
    async with writer:
        paused = await writer.run(history)
        assert paused.pending is not None
        decided = paused.pending.approve(paused.pending.calls[0])
        done = await writer.resume([*history, *paused.new_messages], decided)
    assert REMOVED == ["/tmp/a"]
    # The resumed answer was invalid: the cleaner was asked again, as run_structured does,
    # and its valid answer is the result.
    assert len(cleaning.requests) == 3
    assert b"all tidy!" in cleaning.requests[2].body
    assert done.text == '{"removed": ["/tmp/a"]}'
    assert done.usage_by_agent["cleaner"] == USAGE + USAGE  # the resumed part: answer, re-ask


# -- one owner for an agent given as a tool; one usage_by_agent key per agent in a tree -----


async def test_an_agent_held_open_by_one_outer_agent_is_refused_to_a_second(
    servers: Any,
) -> None:
    research = await servers(researcher_script)
    researcher = build(research, "researcher")
    writer = build(await servers(delegating(("researcher", {"input": "owls"}))), "writer",
                   researcher.as_tool())  # fmt: skip
    editor = build(await servers(delegating(("researcher", {"input": "moths"}))), "editor",
                   researcher.as_tool())  # fmt: skip
    async with writer:
        # The writer opened the researcher: it owns its tasks and closes it with its block,
        # so the editor cannot count on it.
        with pytest.raises(BuildError, match=r"held open by agent 'writer'.*open it yourself"):
            async with editor:
                pass
        assert not editor.is_open
        assert (await writer.run("Write.")).text == "facts about owls"  # unharmed
    assert not researcher.is_open
    # Opened by the host around both, it serves both and outlives each.
    async with researcher:
        async with writer, editor:
            assert (await writer.run("Write.")).text == "facts about owls"
            assert (await editor.run("Edit.")).text == "facts about moths"
        assert researcher.is_open
    # One at a time, each outer agent opens and closes it in turn.
    async with writer:
        assert (await writer.run("Write.")).text == "facts about owls"
    async with editor:
        assert (await editor.run("Edit.")).text == "facts about moths"


def answering(text: str, usage: Usage) -> Callable[[ScriptRequest], Reply]:
    """A model that answers ``text`` with ``usage`` (to tell agents' usage apart)."""
    return lambda request: reply_text(text, usage=usage)


async def test_agents_left_unnamed_count_under_their_tool_names(servers: Any) -> None:
    # The first-day program: nobody named anything.
    inner_usage = Usage(input_tokens=1, output_tokens=2)
    checker_usage = Usage(input_tokens=3, output_tokens=4)
    inner = AgentBuilder().provider(provider(await servers(answering("owls", inner_usage))))
    checker = AgentBuilder().provider(provider(await servers(answering("ok", checker_usage))))
    writing = await servers(delegating(("agent", {"input": "owls?"}), ("checker", {"input": "?"})))
    outer = (
        AgentBuilder()
        .provider(provider(writing))
        .tool(inner.build().as_tool())  # default tool name: "agent"
        .tool(checker.build().as_tool("checker"))
        .build()
    )
    async with outer:
        response = await outer.run("Write.")
        streamed = outer.stream("Write.")
        async with streamed as events:
            async for event in events:
                if isinstance(event, TurnCompleted):
                    assert event.response.usage_by_agent == response.usage_by_agent
    assert response.text == "owls | ok"
    offered = [tool["function"] for tool in writing.requests[0].json()["tools"]]  # type: ignore[index]
    assert [tool["name"] for tool in offered] == ["agent", "checker"]
    assert offered[0]["description"] == "Ask another agent."
    # Each agent's own usage, keyed: the outer one by its name, the inner ones by their tool's.
    assert dict(response.usage_by_agent) == {
        "kova": USAGE + USAGE,
        "agent": inner_usage,
        "checker": checker_usage,
    }
    assert response.usage == USAGE + USAGE + inner_usage + checker_usage


async def test_one_unnamed_agent_given_as_two_tools_counts_under_each(servers: Any) -> None:
    inner_usage = Usage(input_tokens=1, output_tokens=2)
    inner = AgentBuilder().provider(provider(await servers(answering("x", inner_usage)))).build()
    writing = await servers(
        delegating(("short", {"input": "a"}), ("long", {"input": "b"}), ("long", {"input": "c"}))
    )
    outer = build(writing, "writer", inner.as_tool("short"), inner.as_tool("long"))
    async with outer:
        response = await outer.run("Write.")
    assert dict(response.usage_by_agent) == {
        "writer": USAGE + USAGE,
        "short": inner_usage,
        "long": inner_usage + inner_usage,
    }


async def test_three_unnamed_levels_need_a_tool_name_to_tell_two_apart(servers: Any) -> None:
    research = await servers(answering("facts", Usage(input_tokens=1, output_tokens=1)))
    editing = await servers(delegating(("agent", {"input": "facts?"})))
    writing = await servers(delegating(("editor", {"input": "edit"})))
    researcher = AgentBuilder().provider(provider(research)).build()
    editor = AgentBuilder().provider(provider(editing)).tool(researcher.as_tool()).build()
    # Both inner agents would be "agent": refused, saying how to tell them apart.
    clash = AgentBuilder().provider(provider(writing)).tool(editor.as_tool()).build()
    with pytest.raises(BuildError) as refused:
        async with clash:
            pass
    assert str(refused.value) == (
        "two agents in agent 'kova''s tree would both count as 'agent' in usage_by_agent: "
        "the agent (unnamed) behind tool 'agent' and the agent (unnamed) behind tool "
        "'agent' > 'agent'. An agent left with the default name 'kova' counts under the "
        "name of the tool it is given as: give the agents names (AgentBuilder.name) or the "
        "tools other names (as_tool(name=...))"
    )
    assert not editor.is_open
    assert not researcher.is_open
    writer = AgentBuilder().provider(provider(writing)).tool(editor.as_tool("editor")).build()
    async with writer:
        response = await writer.run("Write.")
    assert dict(response.usage_by_agent) == {
        "kova": USAGE + USAGE,
        "editor": USAGE + USAGE,
        "agent": Usage(input_tokens=1, output_tokens=1),
    }


async def test_two_agents_given_one_name_are_refused(servers: Any) -> None:
    research = await servers(researcher_script)
    writing = await servers(delegating(("researcher", {"input": "owls"})))
    # Named alike by the user: usage_by_agent could not tell them apart.
    first, second = build(research, "researcher"), build(research, "researcher")
    outer = build(writing, "writer", first.as_tool("a"), second.as_tool("b"))
    with pytest.raises(BuildError) as refused:
        async with outer:
            pass
    assert str(refused.value) == (
        "two agents in agent 'writer''s tree are named 'researcher': the agent behind tool "
        "'a' and the agent behind tool 'b'. usage_by_agent counts usage by agent name, so "
        "give each its own name (AgentBuilder.name)"
    )
    assert not first.is_open
    assert not second.is_open
    # An unnamed agent given as a tool named like the (unnamed) outer agent: the same clash.
    unnamed = AgentBuilder().provider(provider(research)).build()
    outer = AgentBuilder().provider(provider(writing)).tool(unnamed.as_tool("kova")).build()
    with pytest.raises(BuildError, match=r"would both count as 'kova'.*the outer agent and"):
        async with outer:
            pass
    assert not unnamed.is_open
    # One agent given twice (two tools) is one entry, not a clash.
    researcher = build(research, "researcher")
    twice = build(writing, "writer", researcher.as_tool(), researcher.as_tool("again"))
    async with twice:
        response = await twice.run("Write.")
    assert set(response.usage_by_agent) == {"writer", "researcher"}


async def test_kova_chat_indents_an_inner_agents_approval_question(servers: Any) -> None:
    import io

    from kova.cli._chat import ChatOptions, _approval, _Chat, _Screen

    @tool(name="remove", annotations=ToolAnnotations(read_only=True))
    def look() -> str:  # the chat's own tool: read-only, and named like the cleaner's
        """Nothing to remove."""
        return "nothing"

    REMOVED.clear()
    cleaning = await servers(cleaner_script)
    writing = await servers(delegating(("cleaner", {"input": "tidy"})))
    cleaner = build(cleaning, "cleaner", remove)  # asks the writer's handler
    send, receive = trio.open_memory_channel[Any](0)
    approve = _approval(send, approve_all=False)
    writer = build(writing, "writer", cleaner.as_tool(), look, approval=approve)
    out = io.StringIO()
    screen = _Screen(out, color=False)
    async with writer, send, receive, trio.open_nursery() as nursery:
        chat = _Chat(writer, receive, screen, ChatOptions(selected=None), [], [])
        nursery.start_soon(chat._turn, "Tidy up.")
        # The call to the cleaner, then the cleaner's own (destructive) remove: each asks,
        # though the chat has a read-only tool of that name.
        with trio.fail_after(30):
            for asked in (1, 2):
                while out.getvalue().count("? [y/N] ") < asked:  # noqa: ASYNC110 - no event
                    await trio.sleep(0.01)
                await send.send("y")
    assert REMOVED == ["/tmp/a"]
    shown = out.getvalue()
    # The question and the inner call's line come from two tasks (the console's and the
    # stream's), in either order: each is indented a level under the writer's call.
    assert shown.startswith('[tool] cleaner {"input": "tidy"}\n')
    assert '\nallow cleaner {"input": "tidy"}? [y/N] ' in shown
    assert '\n    allow remove {"path": "/tmp/a"}? [y/N] ' in shown
    assert '    [tool] remove {"path": "/tmp/a"}\n' in shown
