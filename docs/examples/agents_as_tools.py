"""A writer agent that asks a researcher agent, given to it as a tool (``agent.as_tool()``).

The writer's model calls the researcher twice in one step (the two inner turns run at the
same time); the stream shows the researcher's events indented under the call that ran them
(``event.path``), and the response counts both agents' usage. Both models are scripted
(kova.testing), so this runs offline: python docs/examples/agents_as_tools.py
"""

from __future__ import annotations

import trio

from kova import TextDelta, ToolResult, Usage
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.testing import ScriptedProvider, ScriptRequest, reply_text, reply_tool_calls

FACTS = {
    "owls": "Owls can turn their heads 270 degrees.",
    "bats": "Bats find their way by echolocation.",
}


def researcher_model(request: ScriptRequest) -> object:
    """The researcher's model: looks the topic up (here, in a dict)."""
    topic = request.messages[-1].text
    return reply_text(
        FACTS.get(topic, "Nothing found."), usage=Usage(input_tokens=30, output_tokens=12)
    )


def writer_model(request: ScriptRequest) -> object:
    """The writer's model: asks the researcher about two topics, then writes."""
    last = request.messages[-1]
    results = [block.text for block in last.content if isinstance(block, ToolResult)]
    if not results:
        return reply_tool_calls(
            ("researcher", {"input": "owls"}),
            ("researcher", {"input": "bats"}),
            text="Let me ask the researcher.",
        )
    return reply_text("Night animals. " + " ".join(results))


async def main() -> None:
    researcher = (
        AgentBuilder()
        .name("researcher")
        .system_prompt("Answer with one fact about the topic.")
        .provider(ScriptedProvider(researcher_model))
        .build()
    )
    writer = (
        AgentBuilder()
        .name("writer")
        .system_prompt("Write short pieces; ask the researcher for facts.")
        .provider(ScriptedProvider(writer_model))
        .tool(researcher.as_tool(description="Finds one fact about a topic."))
        .build()
    )
    # The writer's block opens the researcher too, and closes it.
    async with writer, writer.stream("Write about night animals.") as events:
        async for event in events:
            indent = "    " * len(event.path)
            match event:
                case ToolCallStarted(call=call):
                    print(f"{indent}-> {call.name}({call.input}) [{call.id}]")
                case ToolCallFinished(call=call, result=result):
                    print(f"{indent}<- {call.name}: {result.text}")
                case TextDelta(text=text) if event.path:
                    print(f"{indent}{event.path[-1]}: {text!r}")
                case TurnCompleted(response=response):
                    print(f"answer: {response.text}")
                    for agent, usage in response.usage_by_agent.items():
                        print(f"  {agent}: {usage.input_tokens} in, {usage.output_tokens} out")
                    print(f"  total: {response.usage.total_tokens} tokens")
                    assert set(response.usage_by_agent) == {"writer", "researcher"}


if __name__ == "__main__":
    trio.run(main)
