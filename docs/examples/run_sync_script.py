"""kova from a plain synchronous script: agent.run_sync, no event loop to write.

Run it: python docs/examples/run_sync_script.py

``run_sync`` opens the agent, runs one turn and closes it, in an event loop of its own; it
works the same inside a running asyncio loop (a Jupyter cell), from a worker thread it joins.
The model is scripted (no network, no API key).
"""

from __future__ import annotations

from pydantic import BaseModel

from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "-3°C, snow"}.get(city, "unknown")


class Forecast(BaseModel):
    city: str
    snow: bool


model = ScriptedProvider(
    [
        reply_tool_calls(("get_weather", {"city": "Oslo"})),
        reply_text("Oslo: -3°C and snowing."),
        reply_text('{"city": "Oslo", "snow": true}'),
    ]
)
agent = AgentBuilder().provider(model).tool(get_weather).build()

print(agent.run_sync("Weather in Oslo?").text)

forecast, response = agent.run_structured_sync("The same, as JSON.", Forecast)
print(forecast, f"({response.llm_calls} model call)")
