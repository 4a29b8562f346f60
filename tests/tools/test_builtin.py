"""The built-in tools in an agent turn, and approval decided by tool annotations."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import attrs
import pytest

from kova import Message, ToolAnnotations, ToolResult, ToolUse
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.testing._http_server import FakeResponse, RecordedRequest, serve_http
from kova.tools import ToolPolicy, ToolRegistry, WebPolicy, builtin_tools, definition, tool

if TYPE_CHECKING:
    from pathlib import Path

    import trio

    from kova.agent import AgentResponse

HISTORY = (Message.user("tidy up the project"),)


def results_of(response: AgentResponse) -> list[ToolResult]:
    return [
        block
        for message in response.new_messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]


def test_builtin_tools_have_the_issue_names_and_annotations(tmp_path: Path) -> None:
    tools = builtin_tools(ToolPolicy(workspace_root=tmp_path), web=True)
    names = [tool.name for tool in tools]
    assert names == [
        "read_file",
        "list_dir",
        "search",
        "edit_file",
        "write_file",
        "patch_file",
        "shell",
        "fetch_webpage",
    ]
    definitions = [definition(tool) for tool in tools]
    read_only = {d.name for d in definitions if d.annotations and d.annotations.read_only}
    assert read_only == {"read_file", "list_dir", "search", "fetch_webpage"}
    registry = ToolRegistry(tools)  # unique names, valid schemas
    assert [d.name for d in registry.definitions()] == names


async def test_an_agent_turn_uses_every_builtin_tool(tmp_path: Path, nursery: trio.Nursery) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")

    async def site(request: RecordedRequest) -> FakeResponse:
        page = b"<html><body><h1>Release notes</h1><p>All <b>green</b>.</p></body></html>"
        return FakeResponse(headers={"content-type": "text/html"}, body=page)

    base_url = await nursery.start(serve_http, site)
    diff = "@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
    model = ScriptedProvider(
        [
            reply_tool_calls(
                ("list_dir", {"path": "."}),
                ("read_file", {"path": "notes.txt"}),
                ("search", {"pattern": "bet"}),
            ),
            reply_tool_calls(("patch_file", {"path": "notes.txt", "diff": diff})),
            reply_tool_calls(
                ("edit_file", {"path": "notes.txt", "old_string": "alpha", "new_string": "ALPHA"})
            ),
            reply_tool_calls(("write_file", {"path": "out/summary.md", "content": "# done\n"})),
            reply_tool_calls(("shell", {"command": "cat notes.txt out/summary.md"})),
            reply_tool_calls(("fetch_webpage", {"url": f"{base_url}/notes"})),
            reply_text("All tidy."),
        ]
    )
    # The loopback test server is private: this policy allows it (plain http too).
    policy = ToolPolicy(
        workspace_root=tmp_path, web=WebPolicy(allow_private_hosts=True, https_only=False)
    )
    agent = AgentBuilder().provider(model).tools(*builtin_tools(policy, web=True)).build()
    async with agent:
        response = await agent.run(HISTORY)
    results = results_of(response)
    assert [result.is_error for result in results] == [False] * 8
    texts = [result.text for result in results]
    assert texts[:6] == [
        "notes.txt",
        "alpha\nbeta\n",
        "notes.txt:2: beta",
        "applied 1 hunk to notes.txt",
        "replaced 1 occurrence in notes.txt",
        "wrote 7 bytes to out/summary.md",
    ]
    assert texts[6] == "exit code: 0\nstdout:\nALPHA\ngamma\n# done\n\nstderr:\n"
    assert texts[7] == f"URL: {base_url}/notes\nStatus: 200\n\n# Release notes\n\nAll **green**."
    assert response.text == "All tidy."


async def test_approval_handler_receives_annotations_and_denies_writers(tmp_path: Path) -> None:
    seen: list[tuple[str, ToolAnnotations]] = []

    async def approve(call: ToolUse, annotations: ToolAnnotations) -> bool:
        seen.append((call.name, annotations))
        return annotations.is_read_only

    model = ScriptedProvider(
        [
            reply_tool_calls(
                ("write_file", {"path": "x.txt", "content": "x"}),
                ("list_dir", {}),
                ("shell", {"command": "touch y.txt"}),
            ),
            reply_text("ok"),
        ]
    )
    policy = ToolPolicy(workspace_root=tmp_path)
    agent = (
        AgentBuilder()
        .provider(model)
        .tools(*builtin_tools(policy))
        .approval_handler(approve)
        .build()
    )
    async with agent:
        response = await agent.run(HISTORY)
    denied_write, listing, denied_shell = results_of(response)
    assert denied_write.is_error
    assert "denied" in denied_write.text
    assert listing == ToolResult(content="(empty directory)", tool_use_id=listing.tool_use_id)
    assert denied_shell.is_error
    assert os.listdir(tmp_path) == []
    assert sorted(name for name, _ in seen) == ["list_dir", "shell", "write_file"]
    assert dict(seen)["shell"].open_world is True


@tool(annotations=ToolAnnotations(read_only=True, title="Clock"))
def what_time() -> str:
    """Tell the time."""
    return "noon"


@tool
def unannotated() -> str:
    """No hints."""
    return "done"


@attrs.define
class TwoArgumentHandler:
    calls: list[tuple[str, bool | None]] = attrs.field(factory=list)

    async def approve(self, call: ToolUse, annotations: ToolAnnotations) -> bool:
        self.calls.append((call.name, annotations.read_only))
        return True


@attrs.define
class OneArgumentHandler:
    calls: list[str] = attrs.field(factory=list)

    async def approve(self, call: ToolUse) -> bool:
        self.calls.append(call.name)
        return True


@pytest.mark.parametrize("handler_type", [TwoArgumentHandler, OneArgumentHandler])
async def test_handler_objects_with_one_or_two_parameters_both_work(
    handler_type: type[TwoArgumentHandler | OneArgumentHandler],
) -> None:
    handler = handler_type()
    model = ScriptedProvider(
        [reply_tool_calls(("what_time", {}), ("unannotated", {})), reply_text("ok")]
    )
    agent = (
        AgentBuilder()
        .provider(model)
        .tools(what_time, unannotated)
        .approval_handler(handler)
        .build()
    )
    async with agent:
        response = await agent.run(HISTORY)
    assert [result.text for result in results_of(response)] == ["noon", "done"]
    if isinstance(handler, TwoArgumentHandler):
        # A tool without annotations is approved with all hints unknown (None).
        assert sorted(handler.calls, key=str) == [("unannotated", None), ("what_time", True)]
    else:
        assert sorted(handler.calls) == ["unannotated", "what_time"]


def test_tool_decorator_and_definition_carry_annotations() -> None:
    assert what_time.annotations == ToolAnnotations(read_only=True, title="Clock")
    assert definition(what_time).annotations == what_time.annotations
    assert definition(unannotated).annotations is None
