"""A FastAPI app on uvicorn (asyncio) with ``kova.serve.app`` mounted at /agents through
``kova.asyncio.asgi_app``; tests/serve/test_uvicorn_mount.py runs it in a subprocess and
drives it over loopback with the official clients.

    python uvicorn_app.py MODEL_URL TOKEN

MODEL_URL is the base URL of kova's fake OpenAI server in the test's process (the agent uses
the real OpenAI-compatible provider against it). The app binds 127.0.0.1 port 0 and prints
``PORT <n>``; it prints ``LIFESPAN CLOSED`` once its lifespan has ended (the agents closed)
and ``STOPPED`` when uvicorn has returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI

import kova.asyncio
import kova.serve
from kova.agent import AgentBuilder, RetryConfig
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

MODEL_URL, TOKEN = sys.argv[1:3]

provider = OpenAiCompatibleProvider(OpenAiConfig(base_url=MODEL_URL, model="m", api_key="k"))
agent = AgentBuilder().provider(provider).name("helper").retry_config(RetryConfig(max_retries=0))
agents = kova.asyncio.asgi_app(kova.serve.app(agent.build(), token=TOKEN))


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with agents.lifespan():  # opens the agent and /mcp's sessions, on kova's trio side
        yield
    print("LIFESPAN CLOSED", flush=True)


app = FastAPI(lifespan=lifespan)
app.mount("/agents", agents)


@app.get("/health")
async def health() -> dict[str, object]:
    """A route of the asyncio app itself."""
    await asyncio.sleep(0)
    return {"ok": True, "loop": type(asyncio.get_running_loop()).__module__}


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises SIGINT again once stopped
        uvicorn.Server(config).run(sockets=[listener])
    print("STOPPED", flush=True)


if __name__ == "__main__":
    main()
