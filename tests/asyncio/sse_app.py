"""A FastAPI app that streams a kova agent as server-sent events through kova.asyncio, served
by uvicorn; tests/asyncio/test_asyncio_fastapi.py runs it in a subprocess and drives it over
loopback.

    python sse_app.py LOOP MODEL_URL RUNTIME

LOOP is ``asyncio`` or ``uvloop``; MODEL_URL the base URL of kova's fake OpenAI server (the
agent uses the real OpenAI-compatible provider against it); RUNTIME ``lifespan`` to open
kova's guest run in the app's lifespan, ``lazy`` to let the first request start it. The app
binds 127.0.0.1 port 0 and prints ``PORT <n>``; it prints ``LIFESPAN CLOSED`` once its
lifespan has ended and ``STOPPED`` when uvicorn has returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
from typing import TYPE_CHECKING

import psutil
import trio
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse

import kova.asyncio
from kova import TextDelta
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

LOOP, MODEL_URL, RUNTIME = sys.argv[1:4]
MODEL_PORT = int(MODEL_URL.rsplit(":", 1)[1].split("/")[0])


def build_agent() -> kova.agent.Agent:
    config = OpenAiConfig(base_url=MODEL_URL, model="gpt-fake", api_key="test")
    return (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=0))
        .build()
    )


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        if RUNTIME == "lifespan":
            await stack.enter_async_context(kova.asyncio.open_runtime())
        app.state.agent = await stack.enter_async_context(kova.asyncio.open_agent(build_agent()))
        yield
    print("LIFESPAN CLOSED", flush=True)


app = FastAPI(lifespan=lifespan)


@app.get("/chat")
async def chat(q: str) -> StreamingResponse:
    agent: kova.asyncio.AsyncioAgent = app.state.agent

    async def events() -> AsyncIterator[str]:
        async with agent.stream(q) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    yield f"data: {json.dumps({'text': event.text})}\n\n"
                elif isinstance(event, TurnCompleted):
                    yield f"data: {json.dumps({'done': event.response.text})}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/ask")
async def ask(q: str, seconds: float) -> JSONResponse:
    agent: kova.asyncio.AsyncioAgent = app.state.agent
    try:
        async with asyncio.timeout(seconds):
            response = await agent.run(q)
    except TimeoutError:
        return JSONResponse({"timed_out": True}, status_code=504)
    return JSONResponse({"text": response.text})


async def _trio_tasks() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(c) for n in task.child_nurseries for c in n.child_tasks)

    await trio.lowlevel.checkpoint()
    return count(trio.lowlevel.current_root_task())


@app.get("/census")
async def census() -> dict[str, object]:
    """What is running in this process: to check that nothing is left behind."""
    agent: kova.asyncio.AsyncioAgent = app.state.agent
    model_connections = [
        connection
        for connection in psutil.Process().net_connections(kind="tcp")
        if connection.raddr and connection.raddr.port == MODEL_PORT
    ]
    return {
        "asyncio_tasks": sorted(
            str(task.get_coro()).split(" at ")[0] for task in asyncio.all_tasks()
        ),
        "trio_tasks": await agent.runtime.run(_trio_tasks),
        # trio's thread cache keeps idle workers for a while; they run nothing.
        "threads": sorted(
            thread.name
            for thread in threading.enumerate()
            if not thread.name.startswith("Trio thread")
        ),
        "model_connections": len(model_connections),
        "loop": type(asyncio.get_running_loop()).__module__,
    }


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app,
        loop=LOOP,
        log_level="warning",
        timeout_graceful_shutdown=2,
        limit_concurrency=1000,
        backlog=1024,
    )
    try:
        uvicorn.Server(config).run(sockets=[listener])
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    print("STOPPED", flush=True)


if __name__ == "__main__":
    main()
