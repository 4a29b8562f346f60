"""The agent loop end to end, with a scripted model (no network, no API key).

Run it: python docs/examples/agent_loop.py
"""

from __future__ import annotations

import trio

from kova import Message, TextDelta
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "-3°C, snow", "Lisbon": "17°C, sun"}.get(city, "unknown")


async def main() -> None:
    # The "model" asks for two tool calls (run concurrently), then answers.
    model = ScriptedProvider(
        [
            reply_tool_calls(
                ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lisbon"})
            ),
            reply_text("Oslo is snowy at -3°C; Lisbon is sunny at 17°C."),
        ]
    )
    agent = AgentBuilder().provider(model).system_prompt("Be brief.").tool(get_weather).build()

    history = [Message.user("Weather in Oslo and Lisbon?")]
    async with agent:
        # run(): one turn over caller-owned history; persist new_messages.
        response = await agent.run(history)
        history.extend(response.new_messages)
        print(response.text)
        print(f"{response.llm_calls} model calls, {response.usage.total_tokens} tokens")

        # stream(): the same loop, event by event.
        streamed = ScriptedProvider(
            [reply_tool_calls(("get_weather", {"city": "Oslo"})), reply_text("Still snowing.")]
        )
        agent2 = AgentBuilder().provider(streamed).tool(get_weather).build()
        async with agent2, agent2.stream([*history, Message.user("And now?")]) as events:
            async for event in events:
                match event:
                    case TextDelta(text=text):
                        print(text, end="", flush=True)
                    case ToolCallStarted(call=call):
                        print(f"\n-> {call.name}({dict(call.input)})")
                    case ToolCallFinished(result=result):
                        print(f"<- {result.text}")
                    case TurnCompleted(response=done):
                        print(f"\n[{len(done.new_messages)} new messages]")


if __name__ == "__main__":
    trio.run(main)
