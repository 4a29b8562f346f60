"""Tool arguments as they stream (issue 50): ``ToolCallDelta`` events in ``agent.stream`` for
all six wire formats, whatever the chunking, end with exactly the final arguments."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from _fake_formats import NATIVE as FORMATS
from _fake_formats import Format

from kova import StopReason, ToolUse
from kova._stream_events import StopEvent, ToolUseDelta, ToolUseEnd, ToolUseStart
from kova.agent import AgentBuilder, ToolCallDelta, ToolCallStarted, TurnCompleted
from kova.providers import ModelResponse
from kova.testing import StreamReply, reply_text
from kova.tools import tool


@tool
def write_note(title: str, body: str, tags: list[str]) -> str:
    """Write a note.

    Args:
        title: the title.
        body: the text.
        tags: labels.
    """
    return "written"


def _chunked_call(rng: random.Random, call_id: str) -> StreamReply:
    arguments = {
        "title": rng.choice(["plan", "ünïcode ✓", 'quote " and \\ slash']),
        "body": "".join(rng.choice("abc xyz\n{}[]\"'") for _ in range(rng.randint(0, 300))),
        "tags": [f"t{n}" for n in range(rng.randint(0, 4))],
    }
    text = json.dumps(arguments, ensure_ascii=rng.random() < 0.5)
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 12))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    call = ToolUse(id=call_id, name="write_note", input=arguments)
    events = (
        ToolUseStart(index=0, id=call_id, name="write_note"),
        *(ToolUseDelta(index=0, partial_json=piece) for piece in pieces),
        ToolUseEnd(index=0),
        StopEvent(stop_reason=StopReason.TOOL_USE),
    )
    return StreamReply(
        response=ModelResponse(content=(call,), stop_reason=StopReason.TOOL_USE), events=events
    )


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
@pytest.mark.parametrize("seed", range(8))
async def test_the_deltas_add_up_to_the_final_arguments(fmt: Format, seed: int) -> None:
    rng = random.Random(seed)
    reply = _chunked_call(rng, "call_a")
    async with fmt.open_server([reply, reply_text("done")]) as server:
        agent = AgentBuilder().provider(fmt.build(server)).tool(write_note).build()
        deltas: list[ToolCallDelta] = []
        started: list[Any] = []
        async with agent, agent.stream("write it") as events:
            async for event in events:
                if isinstance(event, ToolCallDelta):
                    deltas.append(event)
                elif isinstance(event, ToolCallStarted):
                    started.append(event)
                elif isinstance(event, TurnCompleted):
                    response = event.response
    assert response.text == "done"
    assert deltas, "no ToolCallDelta"
    (call,) = [event.call for event in started]
    final = deltas[-1]
    assert final.name == "write_note"
    assert final.call_id == call.id
    assert json.loads(final.arguments_text) == dict(call.input)
    assert final.partial == dict(call.input)
    # Each delta's text extends the one before it.
    for before, after in itertools.pairwise(deltas):
        assert after.arguments_text.startswith(before.arguments_text)
        assert len(after.arguments_text) > len(before.arguments_text)


def test_partial_reads_an_unfinished_object() -> None:
    delta = ToolCallDelta(call_id="c", name="write_note", arguments_text='{"title": "pl')
    assert delta.partial == {"title": "pl"}
    assert ToolCallDelta(call_id="c", name="n", arguments_text="").partial is None
