"""kova chat's screen (issue 44, item 11): an approval question stays in view. Before, a tool
running beside the one asking printed its result on the question's line
(``allow write_file {...}? [y/N] [result] chat.json``) and the question scrolled away."""

from __future__ import annotations

import io

import trio

from kova import ToolUse
from kova.cli._chat import _Ask, _Chat, _Screen


def _ask(name: str) -> _Ask:
    reply_send, _ = trio.open_memory_channel[bool](1)
    return _Ask(call=ToolUse(id="c1", name=name, input={"path": "chat.json"}), reply=reply_send)


def test_other_output_goes_above_the_question_which_is_asked_again() -> None:
    out = io.StringIO()
    screen = _Screen(out, color=False)
    chat = _Chat(None, None, screen, None, [], ())  # type: ignore[arg-type]
    screen.write("[tool] write_file {...}\n")
    chat._show_ask(_ask("write_file"))
    question = 'allow write_file {"path": "chat.json"}? [y/N] '
    screen.write("[result] chat.json\n")
    screen.write("[tool] list_dir {}\n")
    text = out.getvalue()
    assert "[y/N] [" not in text
    assert text.endswith(question)  # the last thing on screen, where the answer goes
    assert text.splitlines() == [
        "[tool] write_file {...}",
        question,
        "[result] chat.json",
        question,
        "[tool] list_dir {}",
        question,
    ]
    # Answered (the user's Enter ended the line): output goes on, the question is not
    # asked again.
    screen.answered()
    screen.write("[result] written\n")
    assert out.getvalue().endswith(question + "[result] written\n")
    assert out.getvalue().count(question) == 3


def test_a_partial_line_waits_for_its_end_before_the_question_comes_back() -> None:
    out = io.StringIO()
    screen = _Screen(out, color=False)
    screen.ask("allow x {}? [y/N] ")
    screen.write("some text")
    screen.write(" and more\n")
    assert out.getvalue() == "allow x {}? [y/N] \nsome text and more\nallow x {}? [y/N] "


async def test_a_tool_search_and_a_guard_show_dimmed_and_tools_marks_deferred_ones() -> None:
    """What the turn did by itself is on the screen: a search_tools call and what it found,
    a tool guard's denial; /tools marks the deferred tools."""
    from kova import Message
    from kova.agent import AgentBuilder, Deny, ToolGuard
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    @tool(defer=True)
    def send_email(to: str) -> str:
        """Send an email message."""
        return "sent"

    provider = ScriptedProvider(
        [
            reply_tool_calls(("search_tools", {"query": "email"})),
            reply_tool_calls(("send_email", {"to": "bo@example.com"})),
            reply_text("done"),
        ]
    )
    guard = ToolGuard(lambda call: Deny("no mail today") if call.name == "send_email" else None)
    agent = AgentBuilder().provider(provider).tool(send_email).guards(guard).build()
    out = io.StringIO()
    screen = _Screen(out, color=False)
    chat = _Chat(agent, None, screen, None, [], (send_email,))  # type: ignore[arg-type]
    async with agent:
        await chat._stream([Message.user("mail bo")])
    text = out.getvalue()
    assert "[search_tools 'email': send_email]" in text
    assert "[guard <lambda> denied a call: no mail today]" in text
    listed = _Chat(agent, None, screen, _Approving(), [], (send_email,))  # type: ignore[arg-type]
    assert "(deferred: found with search_tools)" in listed._tool_list()


class _Approving:
    approve_all = True
