"""For the lead (stream decoders): the same id-less call in two streamed answers gets two ids."""

from __future__ import annotations

import pytest

from kova import Message, ToolUse
from kova.agent import AgentBuilder, TurnCompleted
from kova.providers._codec import call_id
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.testing import (
    Script,
    open_gemini_server,
    open_ollama_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool


@tool
def get_time() -> str:
    """The time now."""
    return "12:00"


@pytest.mark.parametrize("name", ["ollama", "gemini"])
async def test_the_same_streamed_call_in_two_answers_gets_two_ids(name: str) -> None:
    call = ToolUse(
        id="x", name="get_time", input={}, provider_metadata={"gemini_synthetic_id": True}
    )
    script = Script([reply_tool_calls(call), reply_tool_calls(call), reply_text("done")])
    opener = open_ollama_server if name == "ollama" else open_gemini_server
    async with opener(script) as server:
        if name == "ollama":
            provider = OllamaProvider(OllamaConfig(model="m", base_url=server.base_url))
        else:
            provider = GeminiProvider(
                GeminiConfig(model="m", base_url=server.base_url, api_key="k")
            )
        agent = AgentBuilder().provider(provider).tool(get_time).build()
        async with agent, agent.stream([Message.user("time twice")]) as events:
            done = [e async for e in events if isinstance(e, TurnCompleted)]
    messages = done[0].response.new_messages
    ids = [b.id for m in messages for b in m.content if isinstance(b, ToolUse)]
    assert len(ids) == 2
    assert ids[0] != ids[1]


def test_a_made_call_id_is_stable_and_tells_name_arguments_place_and_answer_apart() -> None:
    made = call_id("get_time", {"zone": "UTC"}, 0, "answer-1")
    assert made == call_id("get_time", {"zone": "UTC"}, 0, "answer-1")
    others = {
        call_id("get_date", {"zone": "UTC"}, 0, "answer-1"),
        call_id("get_time", {"zone": "CET"}, 0, "answer-1"),
        call_id("get_time", {"zone": "UTC"}, 1, "answer-1"),
        call_id("get_time", {"zone": "UTC"}, 0, "answer-2"),
        call_id("get_time", {"zone": "UTC"}, 0),
    }
    assert made not in others
    assert len(others) == 5
    assert made.startswith("call_")
    assert len(made) == len("call_") + 16
