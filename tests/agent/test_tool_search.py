"""The deferred tools of a turn and ``search_tools`` answers (kova/agent/_tool_search.py)."""

from __future__ import annotations

import pytest

from kova import ToolDefinition, ToolUse
from kova.agent._tool_search import SEARCH_TOOLS, ToolSearch, ToolsFound, search_tools_definition
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
