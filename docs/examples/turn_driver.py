"""A driver of kova's turn core in plain Python: no event loop, no actors, no network.

The turn core (kova.agent.Turn) decides; this loop does what it says: it asks a "model" (here
a script of answers) and runs tools (plain functions), and it saves the turn as JSON after
every step and carries on from the saved copy, as a workflow engine or a crash-safe runner
would. Run it: python docs/examples/turn_driver.py
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kova import InferenceConfig, Message, ToolDefinition, ToolResult
from kova.agent import DEFER, AgentResponse, AwaitApproval, CallModel, Finished, RunTools, Turn
from kova.providers import ModelResponse, heuristic_count_tokens
from kova.testing import reply_text, reply_tool_calls

if TYPE_CHECKING:
    from collections.abc import Callable

SCRIPT = [
    reply_tool_calls(("add", {"a": 2, "b": 3}), ("delete", {"path": "/tmp/x"})),
    reply_text("2 + 3 is 5, and /tmp/x stays where it is."),
]
TOOLS: dict[str, Callable[..., str]] = {
    "add": lambda a, b: str(a + b),
    "delete": lambda path: f"deleted {path}",
}
DEFINITIONS = [ToolDefinition(name="add"), ToolDefinition(name="delete")]


def model(request: object) -> ModelResponse:
    return SCRIPT.pop(0)


# --- the driver (the part to copy) ---------------------------------------------------------
def drive(turn: Turn) -> AgentResponse:
    """Run ``turn`` to its end; every step survives a save and restore."""
    while True:
        match turn.next_step():
            case CallModel(request=request, count_tokens=True):
                turn.tokens_counted(heuristic_count_tokens(request.messages, request.tools))
            case CallModel(request=request):
                turn.model_replied(model(request))
            case RunTools(calls=calls, approved=approved):
                turn.tools_finished(
                    [
                        ToolResult(content=TOOLS[call.name](**call.input))
                        if call.name != "delete" or call.id in approved
                        else DEFER  # a person decides about deletions
                        for call in calls
                    ]
                )
            case AwaitApproval(pending=pending):
                for call in pending.calls:
                    pending = pending.deny(call.id, "not today")
                turn.decided(pending)
            case Finished(response=response):
                return response
        turn = Turn.from_json(turn.to_json())  # the whole turn, as a value


# -------------------------------------------------------------------------------------------

history = [Message.user("Add 2 and 3, then delete /tmp/x.")]
response = drive(Turn.start(history, tools=DEFINITIONS, config=InferenceConfig(model="any")))
for message in response.new_messages:
    for block in message.content:
        print(f"{message.role}: {block}")
print(f"model calls: {response.llm_calls}")
