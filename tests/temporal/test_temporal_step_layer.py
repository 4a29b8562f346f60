"""What the turn core and the step layer do by themselves, on Temporal (a real dev server):
deferred tools found with ``search_tools`` (answered in the workflow), the agent's context
policy, and its guards."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
from temporal_helpers import builder, fake_openai, fake_server, replays, run, unique
from temporalio.client import Client
from temporalio.worker import Replayer

import kova.temporal
from kova import Message, ToolResult, ToolUse
from kova._record import evolve
from kova.agent import (
    AgentBuilder,
    ClearToolResults,
    Deny,
    InputGuard,
    OutputGuard,
    ToolGuard,
    Trip,
    Turn,
)
from kova.errors import GuardrailTripped
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.temporal._payloads import tools_digest
from kova.temporal._worker import _Digests
from kova.testing import (
    ErrorReply,
    Script,
    ScriptRequest,
    StreamReply,
    open_anthropic_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool
from kova.tools._tool import definition

SENT: list[str] = []


@tool
def lookup(word: str) -> str:
    """Look a word up in the dictionary."""
    return f"{word}: a word"


@tool(defer=True)
def send_email(to: str, body: str) -> str:
    """Send an email message to someone."""
    SENT.append(to)
    return "sent"


@tool(defer=True)
def create_event(title: str) -> str:
    """Create a calendar event."""
    return "created"


@tool(defer=True)
def delete_event(title: str) -> str:
    """Delete a calendar event."""
    return "deleted"


def test_deferred_tools_are_offered_only_once_found(temporal_address: str) -> None:
    offered: list[list[str]] = []
    SENT.clear()

    def script(request: ScriptRequest) -> Any:
        offered.append([definition.name for definition in request.tools])
        step = len(offered)
        if step == 1:
            return reply_tool_calls(("search_tools", {"query": "email someone", "limit": 1}))
        if step == 2:
            return reply_tool_calls(("send_email", {"to": "ada@example.com", "body": "hi"}))
        return reply_text("done")

    with fake_openai(script) as url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("search")
            agents = {"clerk": builder(url, lookup, send_email, create_event, delete_event)}
            async with kova.temporal.worker(client, task_queue=queue, agents=agents):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="clerk",
                    history="Email Ada",
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                response = await kova.temporal.response(handle)
                seen = [
                    (event.kind, event.call.name if event.call else "")
                    async for event in kova.temporal.events(handle)
                    if event.kind != "text"
                ]
                history = await handle.fetch_history()
            # The history replays without a worker, in Temporal's default sandbox (which
            # re-imports what the workflow's module imports outside its passed-through
            # block): the search_tools events the workflow builds are the same.
            await Replayer(workflows=[kova.temporal.AgentWorkflow]).replay_workflow(history)
            return response, seen

        response, seen = run(main)
    assert response.text == "done"
    # The search was answered in the workflow (no model or tool activity for it); the
    # tool it found is offered after the up-front ones from the next call on, and ran.
    assert offered == [
        ["lookup", "search_tools"],
        ["lookup", "search_tools", "send_email"],
        ["lookup", "search_tools", "send_email"],
    ]
    assert SENT == ["ada@example.com"]
    search = response.new_messages[1].content[0]
    assert "send_email" in search.text
    assert seen == [
        ("tool_started", "search_tools"),
        ("tool_finished", "search_tools"),
        ("tool_started", "send_email"),
        ("tool_finished", "send_email"),
    ]


def test_guards_run_in_activities_and_a_replay_runs_none_again(temporal_address: str) -> None:
    """Input, tool and output guards of the worker's agent run for a Temporal turn, each
    decision recorded in the turn. The worker caches no workflow, so every workflow task
    replays the turn from its history: a guard that decided is never run again."""
    ran: list[str] = []
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay an invoice."""
        paid.append(amount)
        return "paid"

    def on_topic(text: str) -> None:
        ran.append(f"input {text}")

    def no_payments(call: ToolUse) -> Deny | None:
        ran.append(f"tool {call.name}")
        return Deny("payments need a person") if call.name == "pay" else None

    def polite(text: str) -> None:
        ran.append(f"output {text}")

    def script(request: ScriptRequest) -> Any:
        if request.messages[-1].role.value == "tool":
            return reply_text("Looked it up; the payment was refused.")
        return reply_tool_calls(("lookup", {"word": "invoice"}), ("pay", {"amount": 40}))

    with fake_openai(script) as url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("guards")
            agent = builder(url, lookup, pay).guards(
                InputGuard(on_topic), ToolGuard(no_payments), OutputGuard(polite)
            )
            async with kova.temporal.worker(
                client, task_queue=queue, agents={"clerk": agent}, max_cached_workflows=0
            ):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="clerk",
                    history="Pay the invoice",
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                response = await kova.temporal.response(handle)
                history = await handle.fetch_history()
                verdicts = [
                    (event.kind, event.guard, event.call.name if event.call else "", event.text)
                    async for event in kova.temporal.events(handle)
                    if event.kind.startswith("guard_")
                ]
            # The history replays without a worker (Temporal's determinism check).
            await Replayer(workflows=[kova.temporal.AgentWorkflow]).replay_workflow(history)
            return response, Turn.from_json(await handle.result()), verdicts

        response, turn, verdicts = run(main)
    assert response.text == "Looked it up; the payment was refused."
    assert paid == []
    results = {block.tool_use_id: block for block in response.new_messages[1].content}
    assert results["call_2"].is_error
    assert "payments need a person" in results["call_2"].text
    # Each guard once; the output guard twice: on the streamed answer (events=True streams
    # it) at its sentence end, and on the whole answer.
    assert sorted(ran) == [
        "input Pay the invoice",
        "output Looked it up; the payment was refused.",
        "output Looked it up; the payment was refused.",
        "tool lookup",
        "tool pay",
    ]
    assert turn.guard_record("input", "on_topic").verdict == "pass"
    assert turn.guard_record("tool", "no_payments", "call_2").verdict == "deny"
    assert turn.guard_record("output", "polite").verdict == "pass"
    assert verdicts == [
        ("guard_passed", "on_topic", "", ""),
        ("guard_passed", "no_payments", "lookup", ""),
        ("guard_denied", "no_payments", "pay", "payments need a person"),
        ("guard_passed", "polite", "", ""),
    ]


def test_guard_trips_end_a_temporal_turn_with_guardrail_tripped(temporal_address: str) -> None:
    """An input guard beside the model call trips: the call in flight is cancelled and the
    turn fails at once with kova's GuardrailTripped. An output guard trips on a streamed
    answer before the text is published."""
    held: list[float] = []

    async def off_topic(text: str) -> Trip:
        await trio.sleep(0.2)
        return Trip("not about invoices")

    def no_secrets(text: str) -> Trip | None:
        return Trip("a secret") if "secret" in text else None

    async def script(request: ScriptRequest) -> Any:
        if request.messages[-1].text == "Tell me a story":
            held.append(time.monotonic())
            await trio.sleep(30)  # cancelled by the trip
        return StreamReply(response=reply_text("The code is secret 1234."), chunk_chars=5)

    with fake_openai(script) as url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("trips")
            agents = {
                "teller": builder(url, lookup).guards(InputGuard(off_topic)),
                "keeper": builder(url).guards(OutputGuard(no_secrets, every_chars=5)),
            }
            teller = unique("turn")
            async with kova.temporal.worker(client, task_queue=queue, agents=agents):
                began = time.monotonic()
                with pytest.raises(GuardrailTripped) as first:
                    await kova.temporal.run_turn(
                        client,
                        agent="teller",
                        history="Tell me a story",
                        task_queue=queue,
                        id=teller,
                    )
                took = time.monotonic() - began
                handle = await kova.temporal.start_turn(
                    client,
                    agent="keeper",
                    history="The code?",
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                with pytest.raises(GuardrailTripped) as second:
                    await kova.temporal.response(handle)
                seen = [event async for event in kova.temporal.events(handle)]
                shown = "".join(event.text for event in seen if event.kind == "text")
                assert [(event.kind, event.guard) for event in seen if event.guard] == [
                    ("guard_tripped", "no_secrets")
                ]
            for turn in (teller, handle.id):  # failed turns replay as failed
                await replays(client, turn)
            return first.value, took, second.value, shown

        first, took, second, shown = run(main)
    assert (first.guard, first.reason) == ("off_topic", "not about invoices")
    assert len(held) == 1
    assert took < 10  # not the 30 s the model call would have taken
    assert (second.guard, second.reason) == ("no_secrets", "a secret")
    assert "secret" not in shown


def test_a_context_overflow_is_compacted_in_the_workflow_and_sent_again(
    temporal_address: str,
) -> None:
    """The provider refuses the prompt as over its window: the model activity says so
    in-band, the workflow's turn compacts with the agent's policy and calls again, once."""
    seen: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return ErrorReply(
                status_code=400,
                message="This model's maximum context length is 8192 tokens.",
                error_type="context_length_exceeded",
            )
        return reply_text("done")

    history = [Message.user("read them all")]
    for step in range(4):
        call = ToolUse(id=f"c{step}", name="lookup", input={"word": str(step)})
        history.append(Message.assistant([call]))
        history.append(Message.tool_results([ToolResult(tool_use_id=call.id, content="y" * 3000)]))
    with fake_openai(script) as url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("overflow")
            # The window is large: only the provider knows the prompt is over it.
            agent = builder(url, lookup).context(ClearToolResults(keep_last=1), window=1_000_000)
            turn = unique("turn")
            async with kova.temporal.worker(client, task_queue=queue, agents={"reader": agent}):
                response = await kova.temporal.run_turn(
                    client, agent="reader", history=history, task_queue=queue, id=turn
                )
            await replays(client, turn)  # the compaction is in its history
            return response

        response = run(main)
    assert response.text == "done"
    assert len(seen) == 2
    results = [
        block.text
        for message in seen[1].messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]
    assert results[-1] == "y" * 3000
    assert all(text.startswith("[tool result cleared") for text in results[:-1])
    assert response.compaction is not None


def test_the_providers_own_tool_search_on_temporal(temporal_address: str) -> None:
    """tool_search(provider_native=True): the model activity sends the deferred tools
    marked for the provider's search, and no search_tools."""
    with fake_server(open_anthropic_server, Script([reply_text("ok")])) as server:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("native")
            config = AnthropicConfig(model="claude-opus-4-8", api_key="k", base_url=server.base_url)
            agent = (
                AgentBuilder()
                .provider(AnthropicProvider(config))
                .tools(lookup, send_email)
                .tool_search(provider_native=True)
            )
            async with kova.temporal.worker(client, task_queue=queue, agents={"clerk": agent}):
                return await kova.temporal.run_turn(
                    client, agent="clerk", history="Email Ada", task_queue=queue, id=unique("turn")
                )

        response = run(main)
        (sent,) = server.messages_requests()
    assert response.text == "ok"
    tools = sent.json()["tools"]
    assert [t.get("name") for t in tools] == ["lookup", "tool_search_tool_bm25", "send_email"]
    assert tools[2]["defer_loading"] is True


def test_the_deferred_tools_digest_is_kept_while_they_are_the_same() -> None:
    digests = _Digests()
    tools = [definition(send_email), definition(create_event)]
    first = digests.deferred("clerk", tools)
    assert first == tools_digest(tools)
    assert digests.deferred("clerk", list(tools)) == first  # the same objects: kept
    changed = [tools[0], evolve(tools[1], description="New.")]
    assert digests.deferred("clerk", changed) == tools_digest(changed) != first
