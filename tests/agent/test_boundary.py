"""No caller can crash the runtime: the public boundary, handlers, hooks and tools.

The fuzz runs against a real OpenAI-format provider on the loopback fake server (its codec
would raise ``AttributeError`` on a malformed history inside the provider actor), with every
agent on one shared runtime and one shared provider actor, while a healthy agent beside them
has to complete every one of its turns.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import structlog
import trio

from kova import (
    BuildError,
    InferenceConfig,
    KovaError,
    Message,
    ResponseFormat,
    Text,
    ToolResult,
    ToolUse,
)
from kova.actors import open_runtime
from kova.agent import (
    Agent,
    AgentBuilder,
    AgentConfig,
    ProviderRef,
    RetryConfig,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    spawn_provider,
)
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import Script, ScriptRequest, open_openai_server, reply_text, reply_tool_calls
from kova.testing._http_server import FakeResponse, FakeStream, RecordedRequest, serve_http
from kova.tools import ToolDefinitionError, ToolRegistry, tool

if TYPE_CHECKING:
    from collections.abc import Callable


@tool
async def echo(word: str) -> str:
    """Echo a word.

    Args:
        word: the word.
    """
    return word


@tool
async def broken() -> str:
    """Always raises."""
    raise RuntimeError("tool bug")


class _Junk:
    """A Tool whose result is not a well-typed ToolResult."""

    name = "junk"
    description = "returns a malformed result"
    parameters: dict[str, object] = {"type": "object", "properties": {}}  # noqa: RUF012

    async def execute(self, arguments: object) -> ToolResult:
        return ToolResult(content=12345)  # type: ignore[arg-type]


def _model(request: ScriptRequest) -> object:
    """Asks for the tools the user names (``call echo broken junk missing``), then answers."""
    last = request.messages[-1]
    if last.role == "tool":
        return reply_text("done")
    words = last.text.split()
    if words[:1] == ["call"]:
        calls = [(name, {"word": "hi"} if name == "echo" else {}) for name in words[1:]]
        return reply_tool_calls(*calls)
    return reply_text(f"ok {len(request.messages)}")


def _approval_raises(call: ToolUse) -> bool:
    raise ValueError("approval bug")


async def _approval_raises_async(call: ToolUse) -> bool:
    await trio.lowlevel.checkpoint()
    raise ValueError("async approval bug")


def _approval_sync_yes(call: ToolUse) -> bool:
    return True


def _approval_junk(call: ToolUse) -> object:
    return None


class _RaisingHook:
    def on_tool_start(self, call: ToolUse) -> None:
        raise RuntimeError("start hook bug")

    async def on_tool_end(self, call: ToolUse, result: ToolResult, **_: object) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("end hook bug")


class _AsyncRaisingHook:
    async def on_tool_start(self, call: ToolUse) -> None:
        raise RuntimeError("async start hook bug")

    def on_tool_end(self, call: ToolUse, result: ToolResult, **_: object) -> None:
        raise RuntimeError("sync end hook bug")


# Each case: what goes in, and the text the TypeError must contain.
BAD_HISTORIES: list[tuple[object, str]] = [
    (None, "got NoneType"),
    (42, "got int"),
    (b"hello", "got bytes"),
    ({"role": "user", "content": "hi"}, "got dict"),
    ([{"role": "user", "content": "hi"}], "history[0] must be a kova.Message, got dict"),
    ([None], "history[0] must be a kova.Message, got NoneType"),
    ([Message.user("a"), "b"], "history[1] must be a kova.Message, got str"),
    ([Message.user("a"), Message(role="user", content=["x"])], "history[1].content[0]"),  # type: ignore[list-item]
    ([Message(role="user", content=(Text(text=5),))], "Text.text must be a str, got int"),  # type: ignore[arg-type]
    (
        [Message(role="tool", content=(ToolResult(content=7, tool_use_id="c"),))],  # type: ignore[arg-type]
        "history[0].content[0]: ToolResult.content",
    ),
    (
        [Message(role="assistant", content=(ToolUse(id="c", name="n", input=[1]),))],  # type: ignore[arg-type]
        "ToolUse.input must be a mapping, got list",
    ),
]


async def _each_entry_point(agent: Agent, history: object, **options: Any) -> list[str]:
    """Try the entry points; return the TypeError messages (each must raise one)."""
    messages: list[str] = []
    entries: list[Callable[[], Any]] = [
        lambda: agent.run(history, **options),  # type: ignore[arg-type]
        lambda: agent.run_structured(history, ResponseFormat(name="x", schema={}), **options),  # type: ignore[arg-type]
    ]
    for entry in entries:
        with pytest.raises(TypeError) as info:
            await entry()
        messages.append(str(info.value))
    with pytest.raises(TypeError) as info:
        async with agent.stream(history, **options) as events:  # type: ignore[arg-type]
            async for _ in events:
                pass
    messages.append(str(info.value))
    return messages


async def test_malformed_history_raises_type_error_naming_the_item() -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder().provider(_provider(server.base_url)).build() as agent,
    ):
        for history, expected in BAD_HISTORIES:
            for message in await _each_entry_point(agent, history):
                assert expected in message, (history, message)
        for options, expected in [
            ({"config": {"temperature": 0}}, "must be a kova.InferenceConfig, got dict"),
            ({"cancel": "now"}, "cancel must be a kova.CancelToken, got str"),
        ]:
            for message in await _each_entry_point(agent, "hi", **options):
                assert expected in message
        # and the agent is fine afterwards
        assert (await agent.run("hi")).text == "ok 1"


async def test_str_and_single_message_are_one_user_message() -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder().provider(_provider(server.base_url)).build() as agent,
    ):
        from_str = await agent.run("hello")
        from_message = await agent.run(Message.user("hello"))
        async with agent.stream("hello") as events:
            streamed = [event async for event in events]
    assert from_str.text == from_message.text == "ok 1"
    assert isinstance(streamed[-1], TurnCompleted)
    assert server.script.requests[0].messages == (Message.user("hello"),)


def _provider(base_url: str) -> OpenAiCompatibleProvider:
    return OpenAiCompatibleProvider(OpenAiConfig(model="gpt-fake", base_url=base_url, api_key="k"))


@attrs.frozen
class _Rig:
    """One fuzzed agent's configuration."""

    approval: object = None
    lifecycle: object = None


RIGS = [
    _Rig(),
    _Rig(approval=_approval_raises),
    _Rig(approval=_approval_raises_async),
    _Rig(approval=_approval_sync_yes),
    _Rig(approval=_approval_junk),
    _Rig(lifecycle=_RaisingHook()),
    _Rig(lifecycle=_AsyncRaisingHook()),
    _Rig(approval=_approval_raises, lifecycle=_RaisingHook()),
]


def _build(provider: ProviderRef, runtime: Any, rig: _Rig) -> Agent:
    builder = AgentBuilder().provider(provider).runtime(runtime).tool(echo).tool(broken)
    builder = builder.tool(_Junk())  # type: ignore[arg-type]
    if rig.approval is not None:
        builder = builder.approval_handler(rig.approval)  # type: ignore[arg-type]
    if rig.lifecycle is not None:
        builder = builder.lifecycle_hook(rig.lifecycle)  # type: ignore[arg-type]
    return builder.build()


async def test_fuzz_nothing_a_caller_does_crashes_a_shared_runtime() -> None:
    rng = random.Random(11)
    healthy_turns = 60
    completed = 0
    with structlog.testing.capture_logs() as logs:
        async with open_openai_server(Script(_model)) as server, open_runtime() as runtime:
            shared = await spawn_provider(runtime, _provider(server.base_url))
            healthy = AgentBuilder().provider(shared).runtime(runtime).tool(echo).build()
            fuzzed = [_build(shared, runtime, rig) for rig in RIGS]
            async with healthy:
                for agent in fuzzed:
                    await agent.__aenter__()
                children = runtime.supervisor.children

                async def healthy_loop() -> None:
                    nonlocal completed
                    for turn in range(healthy_turns):
                        prompt = "call echo" if turn % 3 == 0 else f"turn {turn}"
                        response = await healthy.run([Message.user(prompt)])
                        assert response.text in {"done", "ok 1"}
                        completed += 1

                async def fuzz_loop() -> None:
                    for _ in range(150):
                        agent = rng.choice(fuzzed)
                        kind = rng.random()
                        if kind < 0.5:
                            history, _expected = rng.choice(BAD_HISTORIES)
                            with pytest.raises(TypeError):
                                if rng.random() < 0.5:
                                    await agent.run(history)  # type: ignore[arg-type]
                                else:
                                    async with agent.stream(history) as events:  # type: ignore[arg-type]
                                        async for _ in events:
                                            pass
                        else:
                            names = rng.sample(["echo", "broken", "junk", "missing"], 3)
                            prompt = "call " + " ".join(names)
                            if rng.random() < 0.5:
                                response = await agent.run(prompt)
                            else:
                                async with agent.stream(prompt) as events:
                                    streamed = [event async for event in events]
                                _assert_paired(streamed)
                                last = streamed[-1]
                                assert isinstance(last, TurnCompleted)
                                response = last.response
                            assert response.text == "done"
                            results = [
                                block
                                for block in response.new_messages[1].content
                                if isinstance(block, ToolResult)
                            ]
                            assert len(results) == 3
                            for result in results:
                                assert result.tool_use_id

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(healthy_loop)
                    nursery.start_soon(fuzz_loop)
                assert runtime.supervisor.children == children
                for agent in fuzzed:
                    await agent.__aexit__(None, None, None)
    assert completed == healthy_turns
    crashes = [entry for entry in logs if entry["event"] in {"actor.crashed", "supervisor.gave_up"}]
    assert crashes == []
    assert any(entry["event"] == "tool.hook.failed" for entry in logs)
    assert any(entry["event"] == "tool.approval.failed" for entry in logs)


def _assert_paired(events: list[object]) -> None:
    started = [event.call.id for event in events if isinstance(event, ToolCallStarted)]
    finished = [event.call.id for event in events if isinstance(event, ToolCallFinished)]
    assert sorted(started) == sorted(finished)
    for event in events:
        if isinstance(event, ToolCallFinished):
            before = events[: events.index(event)]
            assert any(
                isinstance(e, ToolCallStarted) and e.call.id == event.call.id for e in before
            )


@pytest.mark.parametrize(
    ("approval", "expected"),
    [
        (_approval_raises, "the approval handler raised ValueError: approval bug"),
        (_approval_raises_async, "the approval handler raised ValueError: async approval bug"),
        (_approval_junk, "denied by the approval handler"),
    ],
)
async def test_raising_approval_handler_denies_in_band(approval: object, expected: str) -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder()
        .provider(_provider(server.base_url))
        .tool(echo)
        .approval_handler(approval)  # type: ignore[arg-type]
        .build() as agent,
    ):
        response = await agent.run("call echo")
    (result,) = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert result.is_error
    assert expected in result.text


async def test_sync_approval_handler_approves() -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder()
        .provider(_provider(server.base_url))
        .tool(echo)
        .approval_handler(_approval_sync_yes)
        .build() as agent,
    ):
        response = await agent.run("call echo")
    (result,) = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert (result.is_error, result.text) == (False, "hi")


@pytest.mark.parametrize("hook", [_RaisingHook(), _AsyncRaisingHook()])
async def test_raising_lifecycle_hook_is_logged_and_changes_nothing(hook: object) -> None:
    with structlog.testing.capture_logs() as logs:
        async with (
            open_openai_server(Script(_model)) as server,
            AgentBuilder()
            .provider(_provider(server.base_url))
            .tool(echo)
            .lifecycle_hook(hook)  # type: ignore[arg-type]
            .build() as agent,
        ):
            response = await agent.run("call echo")
    (result,) = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert (result.is_error, result.text, response.text) == (False, "hi", "done")
    hooks = [entry["hook"] for entry in logs if entry["event"] == "tool.hook.failed"]
    assert hooks == ["on_tool_start", "on_tool_end"]


async def test_sync_lifecycle_hook_is_called() -> None:
    seen: list[str] = []

    class SyncHook:
        def on_tool_start(self, call: ToolUse) -> None:
            seen.append(f"start {call.name}")

        def on_tool_end(self, call: ToolUse, result: ToolResult, **_: object) -> None:
            seen.append(f"end {result.text}")

    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder()
        .provider(_provider(server.base_url))
        .tool(echo)
        .lifecycle_hook(SyncHook())
        .build() as agent,
    ):
        await agent.run("call echo")
    assert seen == ["start echo", "end hi"]


async def test_every_finished_event_follows_its_started_event() -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder()
        .provider(_provider(server.base_url))
        .tool(echo)
        .tool(broken)
        .approval_handler(lambda call: call.name != "broken")
        .build() as agent,
        agent.stream("call echo broken missing") as events,
    ):
        streamed = [event async for event in events]
    _assert_paired(streamed)
    finished = {e.call.name: e.result for e in streamed if isinstance(e, ToolCallFinished)}
    assert set(finished) == {"echo", "broken", "missing"}
    assert finished["broken"].is_error
    assert "denied" in finished["broken"].text
    assert finished["missing"].is_error
    assert "unknown tool" in finished["missing"].text


# -- configuration mistakes: raised where the value is given, nothing reaches an actor --------


def _deep_schema(depth: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _any(value: object) -> Any:
    """``value`` typed as anything: the mistakes below are what mypy would have caught."""
    return value


# Each case: the mistake (a function that makes it), the error it must raise, text it names.
CONFIG_MISTAKES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    (
        "temperature=object()",
        lambda: InferenceConfig(temperature=_any(object())),
        TypeError,
        "temperature",
    ),
    ("temperature=nan", lambda: InferenceConfig(temperature=float("nan")), ValueError, "finite"),
    ("top_p=inf", lambda: InferenceConfig(top_p=float("inf")), ValueError, "top_p"),
    ("max_tokens=1.5", lambda: InferenceConfig(max_tokens=_any(1.5)), TypeError, "max_tokens"),
    (
        "stop_sequences=[1]",
        lambda: InferenceConfig(stop_sequences=_any([1])),
        TypeError,
        "stop_sequences",
    ),
    (
        'response_format="json"',
        lambda: InferenceConfig(response_format=_any("json")),
        TypeError,
        "ResponseFormat",
    ),
    (
        "schema=object()",
        lambda: ResponseFormat(name="x", schema=_any({"a": object()})),
        TypeError,
        "not JSON",
    ),
    (
        "schema 5,000 deep",
        lambda: ResponseFormat(name="x", schema=_any(_deep_schema(2500))),
        ValueError,
        "nested",
    ),
    ('schema="x"', lambda: ResponseFormat(name="x", schema=_any("x")), TypeError, "JSON object"),
    (
        "system_prompt(5)",
        lambda: AgentBuilder().system_prompt(_any(5)),
        BuildError,
        "system_prompt",
    ),
    (
        'retry_config("x")',
        lambda: AgentBuilder().retry_config(_any("x")),
        BuildError,
        "RetryConfig",
    ),
    (
        "max_iterations(1.5)",
        lambda: AgentBuilder().max_iterations(_any(1.5)),
        BuildError,
        "max_iterations",
    ),
    (
        'inference_config("x")',
        lambda: AgentBuilder().inference_config(_any("x")),
        BuildError,
        "InferenceConfig",
    ),
    (
        "max_concurrent_tools(True)",
        lambda: AgentBuilder().max_concurrent_tools(True),
        BuildError,
        "int",
    ),
    ('context_budget("9")', lambda: AgentBuilder().context_budget(_any("9")), BuildError, "int"),
    (
        "max_in_flight=2.0",
        lambda: AgentBuilder().provider(_provider("http://x"), max_in_flight=_any(2.0)),
        BuildError,
        "int",
    ),
    (
        "RetryConfig(initial_backoff=nan)",
        lambda: RetryConfig(initial_backoff=float("nan")),
        ValueError,
        "initial_backoff",
    ),
    (
        'RetryConfig(max_retries="2")',
        lambda: RetryConfig(max_retries=_any("2")),
        TypeError,
        "max_retries",
    ),
    ("tool(None)", lambda: tool(_any(None)), TypeError, "takes a function"),
    (
        "extra_headers={'x': 5}",
        lambda: OpenAiConfig(model="m", api_key="k", extra_headers=_any({"x": 5})),
        TypeError,
        "extra_headers",
    ),
    (
        "AgentConfig(inference='x')",
        lambda: AgentConfig(
            provider=_provider("http://x"), registry=ToolRegistry(), inference=_any("x")
        ),
        BuildError,
        "InferenceConfig",
    ),
]


@pytest.mark.parametrize(
    ("make", "error", "names"),
    [case[1:] for case in CONFIG_MISTAKES],
    ids=[case[0] for case in CONFIG_MISTAKES],
)
def test_a_configuration_mistake_raises_where_the_value_is_given(
    make: Callable[[], object], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=re.escape(names)):
        make()


class _Deep:
    """A Tool whose parameters schema nests 5,000 levels deep."""

    name = "deep"
    description = "a tool with a hostile schema"
    parameters = _deep_schema(2500)

    async def execute(self, arguments: object) -> ToolResult:
        return ToolResult(content="never")


def test_a_tool_whose_schema_is_too_deep_is_refused_at_build() -> None:
    with pytest.raises(ToolDefinitionError, match="nested"):
        AgentBuilder().provider(_provider("http://x")).tool(_Deep()).build()  # type: ignore[arg-type]


@pytest.mark.parametrize("output", ["x", None, 3, object()])  # (int, dict: valid, issue 27)
async def test_run_structured_with_an_output_that_is_no_schema_is_a_type_error(
    output: object,
) -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder().provider(_provider(server.base_url)).build() as agent,
    ):
        with pytest.raises(TypeError, match="ResponseFormat or a type pydantic can validate"):
            await agent.run_structured("hi", output)  # type: ignore[call-overload]
        assert (await agent.run("hi")).text == "ok 1"
    assert len(server.script.requests) == 1


# -- a tool, an approval handler or a hook raising a BaseException ----------------------------


@tool
def exits() -> str:
    """Parses its own command line, as a CLI wrapped as a tool does."""
    sys.exit(2)


@tool
async def generator_exit() -> str:
    """Raises GeneratorExit."""
    raise GeneratorExit


@tool
async def interrupts() -> str:
    """Raises KeyboardInterrupt itself (not a Ctrl-C)."""
    raise KeyboardInterrupt


BASE_EXCEPTION_TOOLS = [exits, generator_exit, interrupts]


async def test_a_tool_raising_a_base_exception_is_an_in_band_error_and_the_turn_goes_on() -> None:
    builder = AgentBuilder().tools(echo, *BASE_EXCEPTION_TOOLS)
    async with (
        open_openai_server(Script(_model)) as server,
        builder.provider(_provider(server.base_url)).build() as agent,
    ):
        response = await agent.run("call exits generator_exit interrupts echo")
        assert (await agent.run("hi")).text == "ok 1"
    assert response.text == "done"
    results = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert [(r.is_error, r.text) for r in results] == [
        (True, "tool 'exits' raised SystemExit: 2"),
        (True, "tool 'generator_exit' raised GeneratorExit"),
        (True, "tool 'interrupts' raised KeyboardInterrupt"),
        (False, "hi"),
    ]


def _approval_exits(call: ToolUse) -> bool:
    raise SystemExit(3)


async def _approval_interrupts(call: ToolUse) -> bool:
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("approval", "expected"),
    [
        (_approval_exits, "the approval handler raised SystemExit: 3"),
        (_approval_interrupts, "the approval handler raised KeyboardInterrupt"),
    ],
)
async def test_an_approval_handler_raising_a_base_exception_denies_in_band(
    approval: object, expected: str
) -> None:
    async with (
        open_openai_server(Script(_model)) as server,
        AgentBuilder()
        .provider(_provider(server.base_url))
        .tool(echo)
        .approval_handler(_any(approval))
        .build() as agent,
    ):
        response = await agent.run("call echo")
    (result,) = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert result.is_error
    assert expected in result.text


class _ExitingHook:
    def on_tool_start(self, call: ToolUse) -> None:
        raise SystemExit(1)

    async def on_tool_end(self, call: ToolUse, result: ToolResult, **_: object) -> None:
        raise KeyboardInterrupt


async def test_a_hook_raising_a_base_exception_is_logged_and_changes_nothing() -> None:
    with structlog.testing.capture_logs() as logs:
        async with (
            open_openai_server(Script(_model)) as server,
            AgentBuilder()
            .provider(_provider(server.base_url))
            .tool(echo)
            .lifecycle_hook(_any(_ExitingHook()))
            .build() as agent,
        ):
            response = await agent.run("call echo")
    assert response.text == "done"
    failed = [entry["error"] for entry in logs if entry["event"] == "tool.hook.failed"]
    assert failed == ["SystemExit(1)", "KeyboardInterrupt()"]


CTRL_C_SCRIPT = """
import signal, sys, trio
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

@tool
async def busy() -> str:
    '''Works without awaiting when the Ctrl-C comes.'''
    signal.raise_signal(signal.SIGINT)
    total = 0
    for number in range(10_000):
        total += number
    return "finished"

async def main() -> None:
    provider = ScriptedProvider([reply_tool_calls(("busy", {})), reply_text("done")])
    async with AgentBuilder().provider(provider).tool(busy).build() as agent:
        response = await agent.run("go")
    print("TURN ENDED", response.text)

trio.run(main)
"""


def test_a_real_ctrl_c_during_a_tool_still_cancels_the_turn() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", CTRL_C_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert "TURN ENDED" not in finished.stdout
    assert finished.returncode != 0
    assert "KeyboardInterrupt" in finished.stderr


# -- everything hostile at once, on one shared runtime -----------------------------------------


def _hostile_replies() -> list[FakeResponse | FakeStream]:
    """What a hostile OpenAI-format server answers, one per request, in turn."""
    deep = "[" * 100_000 + "]" * 100_000
    deep_args = '{"a":' * 300 + "1" + "}" * 300
    sse = {"content-type": "text/event-stream"}
    call = {"id": "c1", "type": "function", "function": {"arguments": "{}"}}
    nameless = json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    return [
        FakeResponse(headers={"content-type": "application/json"}, body=deep.encode()),
        FakeStream(headers=sse, chunks=[b"data: " + deep.encode() + b"\n\n"]),
        FakeStream(
            status=503,
            headers={"content-type": "application/json"},
            chunks=(b"x" * 65536 for _ in range(300)),
        ),
        FakeResponse(
            headers={"content-type": "application/json", "content-encoding": "gzip"},
            body=b"\x1f\x8b\x08\x00 not gzip",
        ),
        FakeStream(
            headers=sse,
            chunks=[
                b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
                b'"type":"function","function":{"name":"f","arguments":'
                + json.dumps(deep_args).encode()
                + b"}}]}}]}\n\n",
                b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
                b"data: [DONE]\n\n",
            ],
        ),
        FakeStream(headers=sse, chunks=[f"data: {nameless}\n\n".encode()]),
    ]


async def test_a_healthy_agent_finishes_every_turn_while_everything_hostile_hits_its_runtime() -> (
    None
):
    replies = _hostile_replies()
    served = itertools.count()

    async def hostile(_: RecordedRequest) -> FakeResponse | FakeStream:
        return replies[next(served) % len(replies)]

    healthy_turns = 30
    completed = 0
    with structlog.testing.capture_logs() as logs:
        async with (
            open_openai_server(Script(_model)) as server,
            trio.open_nursery() as servers,
            open_runtime() as runtime,
        ):
            hostile_url = await servers.start(serve_http, hostile)
            shared = await spawn_provider(runtime, _provider(server.base_url))
            bad = await spawn_provider(
                runtime, _provider(hostile_url), retry=RetryConfig.disabled()
            )
            healthy = AgentBuilder().provider(shared).runtime(runtime).tool(echo).build()
            tools = (echo, broken, *BASE_EXCEPTION_TOOLS)
            exiting = AgentBuilder().provider(shared).runtime(runtime).tools(*tools)
            exiting = exiting.approval_handler(_approval_sync_yes).lifecycle_hook(
                _any(_ExitingHook())
            )
            victim = AgentBuilder().provider(bad).runtime(runtime).build()
            async with healthy, exiting.build() as tool_agent, victim:
                children = runtime.supervisor.children

                async def healthy_loop() -> None:
                    nonlocal completed
                    for turn in range(healthy_turns):
                        prompt = "call echo" if turn % 3 == 0 else f"turn {turn} \ud83d"
                        response = await healthy.run([Message.user(prompt)])
                        assert response.text in {"done", "ok 1"}
                        completed += 1

                async def hostile_loop() -> None:
                    for round_ in range(2 * len(replies)):
                        with pytest.raises(KovaError):
                            if round_ % 2:
                                await victim.run("hi")
                            else:
                                async with victim.stream("hi") as events:
                                    async for _ in events:
                                        pass
                        for _, make, error, _names in CONFIG_MISTAKES:
                            with pytest.raises(error):
                                make()
                        with pytest.raises(TypeError):
                            await tool_agent.run_structured("hi", _any("x"))
                        response = await tool_agent.run(
                            "call exits generator_exit interrupts broken \udc80"
                        )
                        assert response.text == "done"

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(healthy_loop)
                    nursery.start_soon(hostile_loop)
                assert runtime.supervisor.children == children
            servers.cancel_scope.cancel()
    assert completed == healthy_turns
    crashes = [entry for entry in logs if entry["event"] in {"actor.crashed", "supervisor.gave_up"}]
    assert crashes == []
