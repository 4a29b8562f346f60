"""A kova agent behind OpenAI-compatible routes, called with the official openai client.

Run it: python docs/examples/serve_openai.py

``kova.serve.app(agent)`` is an ASGI app; here Hypercorn's trio worker serves it on loopback
(``kova serve`` does the same from the command line) and the openai package asks it a
question. The agent runs its tool on the server; the model is scripted.
"""

from __future__ import annotations

from functools import partial

import openai
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

import kova.serve
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


model = ScriptedProvider(
    [reply_tool_calls(("get_weather", {"city": "Oslo"})), reply_text("Snowing, -3°C.")]
)
agent = AgentBuilder().provider(model).name("weather").tool(get_weather).build()
TOKEN = "a-long-random-secret-for-clients"


async def main() -> None:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    stop = trio.Event()
    app = kova.serve.app(agent, token=TOKEN)  # its lifespan opens the agent
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait))
        async with openai.AsyncOpenAI(base_url=binds[0] + "/v1", api_key=TOKEN) as client:
            response = await client.responses.create(model="weather", input="Weather in Oslo?")
            for item in response.output:
                if item.type == "mcp_call":
                    print(f"the agent ran {item.name}({item.arguments}) -> {item.output}")
            print(response.output_text)
            assert response.usage is not None
            print(f"{response.usage.total_tokens} tokens")
        stop.set()


if __name__ == "__main__":
    trio.run(main)
