"""kova in a FastAPI app served by Hypercorn's trio worker: no bridge, kova used natively.

Run it: python docs/examples/asyncio_hypercorn_trio.py

FastAPI (Starlette, on anyio) runs on trio as well as on asyncio. Served by Hypercorn with
its trio worker (``hypercorn --worker-class trio app:app``), the whole app is trio code, so
the agent is opened in the lifespan and awaited in the endpoints directly, as in any trio
program. The script serves the app on loopback and calls it once; the model is scripted.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import httpx2
import trio
from fastapi import FastAPI
from hypercorn.config import Config
from hypercorn.trio import serve
from pydantic import BaseModel

from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


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
agent = AgentBuilder().provider(model).tool(get_weather).build()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with agent:  # the agent's actors live as long as the app
        yield


app = FastAPI(lifespan=lifespan)


class Question(BaseModel):
    text: str


@app.post("/ask")
async def ask(question: Question) -> dict[str, object]:
    response = await agent.run(question.text)  # trio, natively
    return {"answer": response.text, "model_calls": response.llm_calls}


async def main() -> None:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait))
        async with httpx2.AsyncClient(base_url=binds[0]) as client:
            reply = await client.post("/ask", json={"text": "Weather in Oslo?"})
            print(reply.json())
        stop.set()


if __name__ == "__main__":
    trio.run(main)
