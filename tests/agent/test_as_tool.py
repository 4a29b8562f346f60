"""Agents as tools (``agent.as_tool()``): one agent calling another, on fake servers, with
results, usage, limits, failures, streaming paths, approvals and the agents' lifecycle carried
through every level."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic
import pytest
import trio

from kova import Message, ToolResult, ToolUse, Usage
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
    structure = [item for item in seen if item[0] != "TextDelta"]
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
