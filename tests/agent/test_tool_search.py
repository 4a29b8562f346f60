"""The deferred tools of a turn and ``search_tools`` answers (kova/agent/_tool_search.py)."""

from __future__ import annotations

import pytest

from kova import ToolDefinition, ToolUse
from kova.agent import ToolsFound
from kova.agent._tool_search import SEARCH_TOOLS, ToolSearch, search_tools_definition
from kova.tools import ToolRegistry, tool


def _definitions() -> list[ToolDefinition]:
    return [
        ToolDefinition(name="calendar_create_event", description="Create a calendar event."),
        ToolDefinition(name="calendar_delete_event", description="Delete a calendar event."),
        ToolDefinition(name="mail_send", description="Send an email message."),
    ]


def _call(**arguments: object) -> ToolUse:
    return ToolUse(id="call_1", name=SEARCH_TOOLS, input=arguments)


def test_a_search_loads_the_best_tools_and_says_so():
    search = ToolSearch(_definitions(), limit=1)
    result, found = search.answer(_call(query="make a new meeting"))
    assert found == ToolsFound(
        query="make a new meeting", names=("calendar_create_event",), call_id="call_1"
    )
    assert not result.is_error
    assert result.tool_use_id == "call_1"
    assert "calendar_create_event: Create a calendar event." in result.text
    assert [d.name for d in search.offered()] == ["calendar_create_event"]


def test_found_tools_are_not_found_twice_and_stay_offered():
    search = ToolSearch(_definitions(), limit=5)
    search.answer(_call(query="calendar event", limit=1))
    _, found = search.answer(_call(query="calendar event"))
    assert found is not None
    assert found.names == ("calendar_delete_event",)
    assert search.found == ("calendar_create_event", "calendar_delete_event")


def test_nothing_found_is_an_answer_not_an_error():
    search = ToolSearch(_definitions(), limit=5)
    result, found = search.answer(_call(query="quantum physics"))
    assert found is not None
    assert found.names == ()
    assert not result.is_error
    assert "No tool matches" in result.text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "non-empty 'query'"),
        ({"query": "  "}, "non-empty 'query'"),
        ({"query": 3}, "non-empty 'query'"),
        ({"query": "mail", "limit": 0}, "'limit' must be an integer"),
        ({"query": "mail", "limit": 51}, "'limit' must be an integer"),
        ({"query": "mail", "limit": True}, "'limit' must be an integer"),
    ],
)
def test_bad_arguments_are_answered_in_band(arguments, message):
    result, found = ToolSearch(_definitions(), limit=5).answer(_call(**arguments))
    assert found is None
    assert result.is_error
    assert message in result.text


def test_a_refreshed_list_keeps_what_was_found_and_drops_what_is_gone():
    search = ToolSearch(_definitions(), limit=1)
    search.answer(_call(query="send email"))
    search.replace(_definitions()[:2])
    assert search.found == ("mail_send",)
    assert search.offered() == ()


def test_the_search_tool_definition():
    definition = search_tools_definition(5)
    assert definition.name == "search_tools"
    assert definition.parameters["required"] == ["query"]
    assert definition.annotations is not None
    assert definition.annotations.read_only


def test_deferred_tools_are_kept_apart_in_the_registry():
    @tool(defer=True)
    def rarely_used(x: int) -> int:
        """Something rarely needed."""
        return x

    @tool
    def everyday(x: int) -> int:
        """Something used every turn."""
        return x

    assert rarely_used.defer
    assert not everyday.defer
    registry = ToolRegistry([rarely_used, everyday])
    assert registry.has_deferred
    assert [d.name for d in registry.definitions()] == ["rarely_used", "everyday"]
    assert [d.name for d in registry.definitions(deferred=False)] == ["everyday"]
    assert [d.name for d in registry.definitions(deferred=True)] == ["rarely_used"]
    assert not ToolRegistry([everyday]).has_deferred


# --- through the agent: every driver gets the core's answer ---------------------------------


from kova import ToolResult  # noqa: E402
from kova.agent import (  # noqa: E402
    AgentBuilder,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolsAdded,
    Turn,
    TurnCompleted,
)
from kova.agent._turn import CallModel, RunTools  # noqa: E402
from kova.errors import BuildError  # noqa: E402
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls  # noqa: E402

SENT: list[str] = []


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


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


def _script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            reply_tool_calls(("search_tools", {"query": "email someone", "limit": 1})),
            reply_tool_calls(("send_email", {"to": "ada@example.com", "body": "hi"})),
            reply_text("done"),
        ]
    )


async def test_deferred_tools_are_offered_once_found_and_run():
    SENT.clear()
    provider = _script()
    agent = (
        AgentBuilder()
        .provider(provider)
        .tools(weather, send_email, create_event, delete_event)
        .build()
    )
    async with agent:
        response = await agent.run("mail ada")
    offered = [[tool.name for tool in request.tools] for request in provider.requests]
    assert offered == [
        ["weather", "search_tools"],
        ["weather", "search_tools", "send_email"],
        ["weather", "search_tools", "send_email"],
    ]
    assert SENT == ["ada@example.com"]
    assert response.text == "done"
    search_result = response.new_messages[1].content[0]
    assert isinstance(search_result, ToolResult)
    assert "send_email" in search_result.text
    assert not search_result.is_error


async def test_a_streamed_turn_reports_the_search():
    provider = _script()
    agent = AgentBuilder().provider(provider).tools(weather, send_email, create_event).build()
    async with agent, agent.stream("mail ada") as events:
        kinds = [
            (type(event).__name__, getattr(event, "name", None))
            async for event in events
            if not isinstance(event, TurnCompleted | ToolCallDelta)
        ]
    assert kinds[:4] == [
        ("ToolCallStarted", "search_tools"),
        ("ToolsFound", None),
        ("ToolsAdded", None),
        ("ToolCallFinished", "search_tools"),
    ]
    assert ("ToolCallFinished", "send_email") in kinds


async def test_an_agent_without_deferred_tools_offers_no_search():
    provider = ScriptedProvider([reply_text("hi")])
    async with AgentBuilder().provider(provider).tools(weather).build() as agent:
        await agent.run("hi")
    assert [tool.name for tool in provider.requests[0].tools] == ["weather"]


def test_a_tool_named_search_tools_beside_deferred_tools_is_refused():
    @tool(name="search_tools")
    def mine(query: str) -> str:
        """Search."""
        return query

    with pytest.raises(BuildError, match="'search_tools'"):
        AgentBuilder().provider(ScriptedProvider([])).tools(mine, send_email).build()


@pytest.mark.parametrize("limit", [0, 51, True])
def test_tool_search_limit_is_checked(limit):
    with pytest.raises(BuildError, match="limit"):
        AgentBuilder().tool_search(limit=limit)


def _turn() -> Turn:
    return Turn.start(
        "mail ada",
        tools=[weather_definition()],
        config=kova.InferenceConfig(),
        deferred=[ToolDefinition(name="send_email", description="Send an email message.")],
    )


def weather_definition() -> ToolDefinition:
    return ToolDefinition(name="weather", description="Current weather for a city.")


import kova  # noqa: E402
from kova.providers import ModelResponse  # noqa: E402


def test_the_core_answers_search_calls_and_runs_the_rest():
    turn = _turn()
    step = turn.next_step()
    assert isinstance(step, CallModel)
    assert [tool.name for tool in step.request.tools] == ["weather", "search_tools"]
    reply = reply_tool_calls(
        ("search_tools", {"query": "send email"}), ("weather", {"city": "Oslo"})
    )
    turn.model_replied(reply)
    events = turn.take_events()
    assert [type(event) for event in events] == [
        ToolCallStarted,
        ToolsFound,
        ToolsAdded,
        ToolCallFinished,
    ]
    assert turn.take_events() == ()
    step = turn.next_step()
    assert isinstance(step, RunTools)
    assert [call.name for call in step.calls] == ["weather"]
    turn.tools_finished([ToolResult(content="sunny")])
    step = turn.next_step()
    assert isinstance(step, CallModel)
    assert [tool.name for tool in step.request.tools] == ["weather", "search_tools", "send_email"]
    # both calls answered, in call order
    answers = step.request.messages[-1].content
    assert [block.tool_use_id for block in answers] == [call.id for call in reply.tool_uses]


def test_a_step_of_only_searches_goes_straight_back_to_the_model():
    turn = _turn()
    turn.next_step()
    turn.model_replied(reply_tool_calls(("search_tools", {"query": "email"})))
    assert isinstance(turn.next_step(), CallModel)
    assert turn.found_tools == ("send_email",)


def test_what_was_found_survives_json():
    turn = _turn()
    turn.next_step()
    turn.model_replied(reply_tool_calls(("search_tools", {"query": "email"})))
    restored = Turn.from_json(turn.to_json())
    assert restored == turn
    assert restored.found_tools == ("send_email",)
    step = restored.next_step()
    assert isinstance(step, CallModel)
    assert [tool.name for tool in step.request.tools] == ["weather", "search_tools", "send_email"]
    assert isinstance(reply_text("x"), ModelResponse)


async def test_an_inner_agents_search_reaches_the_outer_stream_with_its_path():
    inner_provider = ScriptedProvider(
        [
            reply_tool_calls(("search_tools", {"query": "send email"})),
            reply_tool_calls(("send_email", {"to": "bo@example.com", "body": "hi"})),
            reply_text("mailed"),
        ]
    )
    inner = AgentBuilder().provider(inner_provider).name("mailer").tools(send_email).build()
    outer_provider = ScriptedProvider(
        [reply_tool_calls(("mailer", {"input": "mail bo"})), reply_text("done")]
    )
    outer = AgentBuilder().provider(outer_provider).tool(inner.as_tool()).build()
    async with inner, outer, outer.stream("mail bo") as events:
        seen = [event async for event in events]
    found = [event for event in seen if type(event).__name__ == "ToolsFound"]
    assert len(found) == 1
    assert found[0].names == ("send_email",)
    assert len(found[0].path) == 1  # under the outer call that ran the inner agent
    assert seen[-1].response.text == "done"


def test_a_hostile_query_is_answered_in_band_and_not_echoed_whole():
    search = ToolSearch(_definitions(), limit=5)
    result, found = search.answer(_call(query="\ud83d" + "zz" * 50_000))
    assert found is not None
    assert found.names == ()
    assert not result.is_error
    assert len(result.text) < 400
